"""Which manuals a question names, and the question without those names."""

import pytest

from knowledge.manual_names import ManualNames

MANUALS = [
    {
        "sha256": "ep",
        "file": "cncmakers_ep100_servo_quickguide.pdf",
        "title": "",
        "vendor": "",
        "model": "EP100",
        "device": "",
    },
    {
        "sha256": "gecko",
        "file": "g540_manual.pdf",
        "title": "G540 4-AXIS DRIVE",
        "vendor": "Geckodrive",
        "model": "G540",
        "device": "",
    },
    {
        "sha256": "gsk",
        "file": "gsk980mdi_alarm_list_zh.pdf",
        "title": "报警和解除",
        "vendor": "",
        "model": "GSK980MDi",
        "device": "",
    },
    {
        "sha256": "frsx",
        "file": "spindle.pdf",
        "title": "SPINDLE DRIVE CONTROLLER TYPE FR-SX MAINTENANCE MANUAL",
        "vendor": "",
        "model": "FR-SX",
        "device": "spindle-1",
    },
    {
        "sha256": "alarms",
        "file": "alarm_codes.pdf",
        "title": "Alarm codes",
        "vendor": "Grbl",
        "model": "ALARM-CODES",
        "device": "",
    },
]


def _manual(sha256: str, **fields: str) -> dict[str, str]:
    return {"sha256": sha256, "file": "", "title": "", "vendor": "", "model": "", "device": "", **fields}


def _printing(printed: dict[str, set[str]]):
    """`printed_in` for a library whose pages print these words (by manual sha256)."""
    return lambda word: printed.get(word, set())


@pytest.fixture
def names():
    return ManualNames(MANUALS)


@pytest.mark.parametrize(
    ("question", "named"),
    [
        ("EP100 err 9", {"ep"}),
        ("gecko red LED stays on", {"gecko"}),
        ("980MDi急停报警怎么解除", {"gsk"}),
        ("fr sx source voltage drop alarm", {"frsx"}),
        ("三菱FR-SX主轴驱动器报超速报警", {"frsx"}),
        ("spindle-1 hunts at orientation", {"frsx"}),
    ],
)
def test_a_question_names_its_manual_by_model_vendor_designation_or_device(names, question, named):
    assert names.mentioned(question) == named


@pytest.mark.parametrize(
    "question", ["ALARM 1", "the servo drive trips", "alarm codes please", "manual page 9", "drive shows error 23"]
)
def test_words_every_manual_might_use_name_no_manual(names, question):
    assert names.mentioned(question) == set()


def test_the_names_leave_the_question_but_the_rest_stays(names):
    assert names.without_names("EP100 err 9") == "err 9"
    assert names.without_names("980MDi急停报警怎么解除") == "急停报警怎么解除"
    assert names.without_names("the motor is hot") == "the motor is hot"
    assert names.without_names("G540") == "G540"  # nothing left: the name is the question


def test_a_kind_of_equipment_other_manuals_print_names_no_manual_but_a_brand_does():
    # `pump` of the file name is printed by two other manuals: a question about some other pump is not
    # about this one. `Grundfos` is printed by its own manual alone.
    pump = _manual("pump", file="grundfos_cr_pump.pdf")
    names = ManualNames([*MANUALS, pump], printed_in=_printing({"pump": {"pump", "ep", "gecko"}, "grundfos": {"pump"}}))
    assert names.mentioned("hydraulic pump pressure drops after ten minutes") == set()
    assert names.mentioned("grundfos pump will not run") == {"pump"}
    assert ManualNames([*MANUALS, pump]).mentioned("hydraulic pump pressure drops") == {"pump"}


def test_a_short_brand_typed_with_part_of_its_model_names_the_manual():
    mks = _manual("mks", vendor="MKS", model="SERVO42D")
    names = ManualNames([*MANUALS, mks])
    assert names.mentioned("mks42d magnet weak") == {"mks"}
    assert names.without_names("mks42d magnet weak") == "magnet weak"
    assert names.mentioned("mks99x magnet weak") == set()  # no designation of MKS holds `99x`


def test_a_word_other_manuals_print_begins_no_brand():
    # `fire` begins `Fireye`, but the boiler manuals print it: fire tubes are no flame safeguard's question.
    # `gecko`, printed by its own manual alone, still names Geckodrive.
    fireye = _manual("fireye", vendor="Fireye")
    names = ManualNames([*MANUALS, fireye], printed_in=_printing({"fire": {"fireye", "ep", "gsk"}, "gecko": {"gecko"}}))
    assert names.mentioned("black mounds and pitting on the fire tubes") == set()
    assert names.mentioned("gecko red LED stays on") == {"gecko"}
    assert ManualNames([*MANUALS, fireye]).mentioned("pitting on the fire tubes") == {"fireye"}


def test_a_designation_typed_after_a_kind_of_product_names_the_manual():
    # The title prints `SERVO42D/57D_CAN`; technicians call the larger motor SERVO57D.
    mks = _manual("mks", title="MKS SERVO42D/57D_CAN USER MANUAL")
    names = ManualNames([*MANUALS, mks])
    assert names.mentioned("SERVO57D shows Wrong Protect!") == {"mks"}
    assert names.without_names("SERVO57D shows Wrong Protect!") == "shows Wrong Protect!"
    assert names.mentioned("servo99x shows Wrong Protect!") == set()


def test_a_series_and_a_model_name_that_models_manuals_not_the_siblings_the_series_names_too():
    """Each sibling's file name begins with the series (`tidewell_tw40`): the series word alone names both, the
    model beside it names one product, in each of its editions (the Chinese one too, whose file name is no
    name)."""
    siblings = ManualNames(
        [
            _manual("tw40", file="tidewell_tw40.pdf", vendor="Brannock", model="TW-40"),
            _manual("tw90", file="tidewell_tw90.pdf", vendor="Brannock", model="TW-90"),
            _manual("tw90-zh", file="说明书.pdf", vendor="Brannock", model="TW-90"),
            _manual("other", file="quillon_qx5.pdf", vendor="Quillon", model="QX-5"),
        ]
    )
    assert siblings.mentioned("tidewell inverter trips") == {"tw40", "tw90", "tw90-zh"}
    assert siblings.mentioned("what does E07 mean on the Tidewell TW-90") == {"tw90", "tw90-zh"}
    assert siblings.mentioned("TW-40 or TW-90, E01 on both") == {"tw40", "tw90", "tw90-zh"}


def test_siblings_without_a_model_read_from_them_are_told_apart_by_their_file_names():
    siblings = ManualNames(
        [
            _manual("s30", file="marlow_silence_30_service.pdf"),
            _manual("s50", file="marlow_silence_50_service.pdf"),
            _manual("other", file="quillon_qx5.pdf", vendor="Quillon", model="QX-5"),
        ]
    )
    assert siblings.mentioned("Marlow Silence 50 error E03") == {"s50"}


def test_a_designation_spelt_with_underscores_in_a_file_name_names_its_manual():
    """The operating manual is known by its file name alone (`acme_cmmt_as_…`), the safety manual by its title's
    `CMMT-AS`: `CMMT-AS` names both, not only the manual that prints it joined."""
    library = ManualNames(
        [
            _manual("ops", file="acme_cmmt_as_betriebsanleitung_de.pdf", vendor="Acme"),
            _manual("safety", file="safety.pdf", title="CMMT-AS-...-S1 Servoantriebsregler"),
            # A library of other products, as a plant's is: a name two manuals share still names them.
            *(_manual(f"other{n}", file=f"quillon_qx{n}.pdf", vendor="Quillon", model=f"QX-{n}") for n in range(7)),
        ]
    )
    assert library.mentioned("CMMT-AS Status-LED blinkt rot") == {"ops", "safety"}


def test_a_short_series_name_is_a_name_before_a_kind_of_equipment():
    """`EV` alone is two letters of any text; before `drive` or `inverter` it is the series of `acme_ev_inverter`."""
    library = ManualNames(
        [
            _manual("ev", file="acme_ev_inverter_manual.pdf"),
            _manual("hy", file="acme_hy_series_inverter_manual.pdf"),
            *(_manual(f"other{n}", file=f"quillon_qx{n}.pdf", vendor="Quillon", model=f"QX-{n}") for n in range(7)),
        ]
    )
    assert library.mentioned("the EV drive does not restart after a power dip") == {"ev"}
    assert library.mentioned("EV inverter shows Er3") == {"ev"}
    assert library.mentioned("ev charging station fault") == set()
    # Glued to a Chinese kind of equipment; the file name's `series` passed over.
    assert library.mentioned("HY变频器 直流过电压保护是多少伏") == {"hy"}
    # Once the manual is known its series word leaves the question, whatever follows it.
    assert library.without_names("COT on the Acme EV display") == "COT on the display"


def test_a_version_beside_the_model_chooses_that_edition_and_leaves_the_question():
    """Two versions of one driver's manual: `V4` (or `(V4.0)`) names the V4.0 manual alone, and says nothing more
    about which of its pages answers; a version no edition carries names them both, and stays a word."""
    library = ManualNames(
        [
            _manual("v3", file="acme_cl57t_v3_manual.pdf", model="CL57T", version="V3.0"),
            _manual("v4", file="acme_cl57t_v4_manual.pdf", model="CL57T", version="V4.0"),
            _manual("other", file="quillon_qx5.pdf", vendor="Quillon", model="QX-5", version="V4.0"),
        ]
    )
    assert library.mentioned("cl57t v4 red LED blinks 4 times") == {"v4"}
    assert library.mentioned("CL57T(V3.0) red LED blinks 4 times") == {"v3"}
    assert library.mentioned("CL57T red LED blinks 4 times") == {"v3", "v4"}
    assert library.mentioned("CL57T V9 red LED blinks 4 times") == {"v3", "v4"}
    assert library.without_names("cl57t v4 red LED blinks 4 times") == "red LED blinks 4 times"
    assert library.without_names("CL57T V9 red LED blinks") == "V9 red LED blinks"
