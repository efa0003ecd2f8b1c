"""The PLC subcommands, through argparse as `fixloop` wires them."""

import argparse

from edge.cli import plc as plc_cli
from edge.config import load_config


def run(argv: list[str], config) -> int:
    parser = argparse.ArgumentParser(prog="fixloop")
    plc_cli.register(parser.add_subparsers())
    args = parser.parse_args(argv)
    return args.func(args, config)


def config_for(port: int, tmp_path):
    return load_config(env={"FIXLOOP_STATE_DIR": str(tmp_path), "FIXLOOP__DEVICES__PRESS-3__PLC__PORT": str(port),
                            "FIXLOOP__DEVICES__CNC-7__PLC__PORT": str(port), "FIXLOOP__PLC__READ_BUDGET_MS": "200"})


def test_plc_read_poller_and_fault_commands(plc_sim, tmp_path, capsys):
    from tools.plc.sim_control import ControlServer

    config = config_for(plc_sim.port, tmp_path)
    assert run(["poller", "--once"], config) == 0
    assert "refreshed 8/8" in capsys.readouterr().out
    control = ControlServer({"press-3": plc_sim, "cnc-7": plc_sim}, "127.0.0.1", 0)
    try:
        url = f"http://127.0.0.1:{control.port}"
        assert run(["plc-fault", "silence", "press-3", "--control", url], config) == 0
        assert run(["plc-fault", "set_value", "press-3", "rpm", "--value", "1", "--control", url], config) == 2
        assert "has no sensor 'rpm'" in capsys.readouterr().out
    finally:
        control.stop()
    assert run(["plc-read", "press-3", "冷却液"], config) == 0
    out = capsys.readouterr().out
    assert "from the cache" in out and "UncertainNoCommunicationLastUsableValue" in out
    assert run(["plc-read", "press-9", "coolant"], config) == 1
    assert "Known devices: press-3, cnc-7" in capsys.readouterr().out


def test_plc_fault_without_a_running_simulator_says_so(tmp_path, capsys):
    config = config_for(1, tmp_path)
    assert run(["plc-fault", "clear", "--control", "http://127.0.0.1:9"], config) == 1
    assert "is `fixloop plc-sim` running?" in capsys.readouterr().out
