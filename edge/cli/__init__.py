"""The `fixloop` command."""

import os

# numpy's OpenBLAS keeps an idle thread spinning for about 0.1 s after each product. A search makes one (the
# question's vector against every row's) and the spinning thread then holds the second core through the rest of
# the search and into the next: on 2 cores at 50,000 rows that doubled the search's latency. 4 (2^4 cycles) puts
# it to sleep at once; the product itself, its threads and its results are unchanged. OpenBLAS reads this when
# numpy loads it, so it is set here, before any `fixloop` module imports numpy; an operator's own value wins.
os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")
