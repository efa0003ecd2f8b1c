"""A technician at a machine describes what they see, in a long sentence of their own words: the machine's manual
answers with its entry; a question about something no manual covers stays `not_found` at the machine too."""

from pathlib import Path

import pytest

from knowledge.glossary import expand, translate_to_english
from knowledge.models import Scope
from knowledge.search import ManualIndex

PRESS = Scope(vendor="Hydra", model="HP-200", label="press-3")
CNC = Scope(vendor="Meridian", model="VMC-850", label="cnc-7")


@pytest.fixture(scope="module")
def index(demo_index: Path) -> ManualIndex:
    return ManualIndex(demo_index)


@pytest.mark.parametrize(
    ("question", "scope", "code"),
    [
        # Were `not_found`: the glossary rendered none of their words (冷却水, 快没了, 见底), so the English-only
        # model had nothing to read, and their other words (喷头, 忽大忽小, 断断续续) are on no row.
        ("喷头出水忽大忽小 冷却水好像快没了", CNC, "04101"),
        ("机器旁边的冷却水箱快要见底了 喷出来断断续续", CNC, "04101"),
        # Were `not_found`, or answered without the coolant-level entry: `水位` / `液位` (a level) was no word the
        # glossary knew.
        ("开机半天了冷却水出得越来越少 看了一下水位很低", CNC, "04101"),
        ("压力机电机边上那个冷却水位低得看不见了", PRESS, "E110"),
        ("冷却液喷出来有气无力的 水箱快见底了", CNC, "04101"),
        ("主轴润滑那边的油箱快见底了 一直报压力低", CNC, "6070"),
        ("电机冷却那块的水箱快见底了 电机也开始发烫", PRESS, "E110"),
        ("主轴摸上去特别烫手 转着转着就慢下来了 最后停了", CNC, "6065"),
        ("换刀的时候机械手卡在半路不动了 气压表好像偏低", CNC, "E230"),
        ("the coolant tank on this machine is nearly empty and the spray only comes out now and then", CNC, "04101"),
        (
            "the lube reservoir for the spindle seems to have run dry and it keeps complaining about pressure",
            CNC,
            "6070",
        ),
        ("the whole spindle shakes badly during the cut and the finish on the part is terrible", CNC, "6066"),
        (
            "the ram barely presses anything any more and there is oil dripping from one of the hose fittings",
            PRESS,
            "E105",
        ),
    ],
)
def test_a_long_description_at_the_machine_finds_its_entry(index, question, scope, code):
    result = index.query(question, scope)
    assert result.status == "ok"
    assert code in [hit.fault_code for hit in result.hits[:3]]


@pytest.mark.parametrize(
    "question",
    [
        "the label printer next to the line keeps printing blank labels no matter what ribbon I put in",
        "our forklift battery barely lasts half a shift now even after charging all night",
        "车间门口的叉车电瓶充了一晚上还是撑不过半个班",
        "办公室的打印机一直卡纸 换了纸也不行",
        "食堂的洗碗机放不出水 一直在嗡嗡响",
    ],
)
@pytest.mark.parametrize("scope", [PRESS, CNC], ids=["press-3", "cnc-7"])
def test_a_long_description_of_another_machine_is_not_found_at_the_machine(index, question, scope):
    assert index.query(question, scope).status == "not_found"


@pytest.mark.parametrize(
    ("said", "english"),
    [
        ("冷却水快见底了", "coolant low level"),
        ("水箱快没了", "tank low level"),
        ("油箱快用完", "tank low level"),
        ("主轴冷却", "spindle cooling"),
        ("油位看着很低", "fill level"),
    ],
)
def test_how_technicians_say_a_level_runs_low_is_rendered_as_manuals_print_it(said, english):
    assert translate_to_english(said) == english


def test_an_english_low_level_meets_the_chinese_manuals_words():
    assert {"液位低", "见底", "水箱"} <= set(expand("the tank level low").split())
