"""`fixloop index build|status` and `fixloop search`, through `fixloop` as the shell runs it."""

import json
import shutil

import pytest


@pytest.fixture(autouse=True)
def state_dir(tmp_path, fixloop):
    fixloop.env({"FIXLOOP_STATE_DIR": str(tmp_path / "state")})


def test_build_with_a_bad_file_indexes_the_rest_and_reports(demo_index, tmp_path, fixloop):
    folder = tmp_path / "pdfs"
    folder.mkdir()
    for name in ("hydra_hp200_v1.2_zh.pdf", "meridian_vmc850_v2.1_en.pdf"):
        shutil.copy(demo_index.parent / "manuals" / name, folder / name)
    (folder / "scan.pdf").write_text("this is not a pdf")
    code, out, _err = fixloop("index", "build", str(folder))
    out = " ".join(out.split())  # rich wraps at the console width
    assert code == 1
    assert "scan.pdf: not a PDF file" in out and "2 indexed" in out and "1 failed" in out
    assert "(1 read by OCR in" in out and "0 without text" in out
    code, out, _ = fixloop("index", "status", "--json")
    status = json.loads(out)
    assert code == 0 and {m["version"] for m in status["manuals"]} == {"V1.2", "V2.1"}


def test_build_of_nothing_is_an_error(tmp_path, fixloop):
    code, _, err = fixloop("index", "build", str(tmp_path / "missing"))
    assert code == 2 and err.startswith("fixloop index build: no such file or folder: ")


def test_search_code_and_symptom(demo_index, fixloop):
    db = str(demo_index)
    code, out, _ = fixloop("search", "E102", "--device", "press-3", "--db", db, "--json")
    hit = json.loads(out)["hits"][0]
    assert code == 0 and (hit["title"], hit["page"], hit["version"]) == ("Motor over-temperature protection", 2, "V2.1")
    code, out, _ = fixloop("search", "电机过热", "--device", "press-3", "--db", db)
    assert code == 0 and "E102" in out and "电机过温保护" in out
    code, _, err = fixloop("search", "E102", "--device", "nope", "--db", db)
    assert code == 2 and "known devices: cnc-7, press-3" in err


def test_batch_mode_prints_one_json_list_a_line(demo_index, tmp_path, fixloop):
    batch = tmp_path / "queries.txt"
    batch.write_text('E102\n{"query": "spindle head is burning hot", "device": "cnc-7"}\nzxqv wplk\n', encoding="utf-8")
    code, out, err = fixloop("search", "--batch", str(batch), "--json", "--k", "1", "--db", str(demo_index))
    lines = [json.loads(line) for line in out.splitlines()]
    assert code == 0 and len(lines) == 3
    assert len(lines[0]) == 1 and lines[0][0]["fault_code"] == "E102"
    assert lines[1][0]["fault_code"] == "6065" and lines[2] == []
    assert "line 3" in err


def test_the_operator_says_what_the_cover_does_not(demo_index, tmp_path, fixloop):
    folder = tmp_path / "pdfs"
    folder.mkdir()
    shutil.copy(demo_index.parent / "manuals" / "meridian_vmc850_v2.1_en.pdf", folder / "a.pdf")
    shutil.copy(demo_index.parent / "manuals" / "hydra_hp200_v2.1_en.pdf", folder / "b.pdf")
    (folder / "b.pdf.toml").write_text('vendor = "Hydra Presses"\ndevice = "press-3"\n', encoding="utf-8")
    code, _, _ = fixloop("index", "build", str(folder), "--version", "V9.0")
    assert code == 0
    code, out, _ = fixloop("index", "status", "--json")
    manuals = {m["file"]: m for m in json.loads(out)["manuals"]}
    assert manuals["a.pdf"]["version"] == manuals["b.pdf"]["version"] == "V9.0"  # the option, for every manual
    assert (manuals["b.pdf"]["vendor"], manuals["b.pdf"]["device"]) == ("Hydra Presses", "press-3")  # its sidecar
    assert manuals["a.pdf"]["vendor"] == "Meridian"  # the cover, where nobody said otherwise


def test_an_unknown_device_or_a_bad_sidecar_is_named(demo_index, tmp_path, fixloop):
    folder = tmp_path / "pdfs"
    folder.mkdir()
    shutil.copy(demo_index.parent / "manuals" / "hydra_hp200_v2.1_en.pdf", folder / "b.pdf")
    code, _, err = fixloop("index", "build", str(folder), "--device", "press-99")
    assert code == 2 and "unknown device 'press-99'" in " ".join(err.split())
    (folder / "b.pdf.toml").write_text('colour = "red"\n', encoding="utf-8")
    code, _out, err = fixloop("index", "build", str(folder))
    assert code == 2 and "b.pdf.toml" in " ".join(err.split()) and "colour" in err
