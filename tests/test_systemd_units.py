"""The systemd units in systemd/: systemd's own verifier, its security review, and the properties
the deployment depends on (degraded mode when vLLM dies, PLC outages contained, model pinned).

`systemd-analyze` comes with Debian's `systemd` package; without it these tests fail, never skip.
`systemd-analyze verify` refuses a unit whose ExecStart binary does not exist, and this machine has
no /opt/fixloop. The units are therefore copied with the install prefix rewritten: the `fixloop`
script becomes this venv's own, and `vllm` (not installed here: it needs a CUDA box) and llama.cpp's
`llama-server` (built per plant) become this Python interpreter, an executable that exists. Nothing
else in the units is changed.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from edge.cli.main import build_parser
from edge.config import load_config
from edge.llm.profiles import BUILT_IN_PROFILES

UNIT_DIR = Path(__file__).resolve().parent.parent / "systemd"
ENV_EXAMPLE = UNIT_DIR / "fixloop.env.example"
SYSUSERS = UNIT_DIR / "fixloop.sysusers"
SERVICES = [
    "fixloop.service",
    "fixloop-vllm.service",
    "fixloop-poller.service",
    "fixloop-outbox.service",
    "fixloop-llama.service",
]
# Enabled per box (`systemctl enable`), not pulled in by fixloop.target: llama-server on a CPU-only box.
OPT_IN_SERVICES = ["fixloop-llama.service"]
PYTHON_SERVICES = ["fixloop.service", "fixloop-poller.service", "fixloop-outbox.service"]
UNITS = [*SERVICES, "fixloop.target"]
FIXLOOP_BIN = "/opt/fixloop/venv/bin/fixloop"
VLLM_BIN = "/opt/fixloop/vllm-venv/bin/vllm"
LLAMA_BIN = "/opt/fixloop/llama.cpp/bin/llama-server"
HARD_DEPENDENCIES = ("Requires", "Requisite", "BindsTo")


def systemd_tool(name: str) -> str:
    path = shutil.which(name)
    assert path, f"{name} not found: install Debian's `systemd` package (apt-get install systemd)"
    return path


def installed_copy(tmp_path: Path, replaced: dict[str, str] | None = None) -> Path:
    """The units as they would sit on a box, with the two install paths pointing at real executables."""
    fixloop = Path(sys.prefix) / "bin" / "fixloop"
    assert fixloop.is_file(), f"{fixloop} missing: install the package into this venv (pip install -e .)"
    target = tmp_path / "units"
    target.mkdir()
    texts = {name: (UNIT_DIR / name).read_text(encoding="utf-8") for name in UNITS} | (replaced or {})
    for name, text in texts.items():
        text = (
            text.replace(FIXLOOP_BIN, str(fixloop)).replace(VLLM_BIN, sys.executable).replace(LLAMA_BIN, sys.executable)
        )
        (target / name).write_text(text, encoding="utf-8")
    return target


def verify(unit_dir: Path, name: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [systemd_tool("systemd-analyze"), "verify", "--man=no", str(unit_dir / name)],
        capture_output=True,
        text=True,
        timeout=60,
    )


def parse_unit(name: str) -> dict[str, list[tuple[str, str]]]:
    """Section -> [(key, value)], keeping repeated keys and joining backslash continuations."""
    sections: dict[str, list[tuple[str, str]]] = {}
    current: list[tuple[str, str]] = []
    pending = ""
    for raw in (UNIT_DIR / name).read_text(encoding="utf-8").splitlines():
        line = pending + raw.strip()
        pending = ""
        if line.endswith("\\"):
            pending = line[:-1] + " "
            continue
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("["):
            current = sections.setdefault(line.strip("[]"), [])
        else:
            key, _, value = line.partition("=")
            current.append((key.strip(), value.strip()))
    return sections


def values(name: str, section: str, key: str) -> list[str]:
    return [v for k, v in parse_unit(name).get(section, []) if k == key]


def words(name: str, section: str, key: str) -> set[str]:
    return {word for value in values(name, section, key) for word in value.split()}


def env_example() -> dict[str, str]:
    env = {}
    for number, line in enumerate(ENV_EXAMPLE.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        key, sep, value = line.partition("=")
        assert sep and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key), (
            f"{ENV_EXAMPLE.name}:{number}: not KEY=VALUE: {line!r}"
        )
        env[key] = value
    return env


@pytest.mark.parametrize("name", UNITS)
def test_unit_passes_systemd_analyze_verify_without_warnings(tmp_path, name):
    result = verify(installed_copy(tmp_path), name)
    assert result.returncode == 0, result.stderr
    assert result.stderr == "" and result.stdout == "", result.stderr + result.stdout


def test_verify_catches_a_misspelt_directive(tmp_path):
    # The check above must be able to fail: a typo is only a warning to systemd, not an error.
    text = (UNIT_DIR / "fixloop.service").read_text(encoding="utf-8").replace("ProtectSystem=", "ProtectSytem=")
    result = verify(installed_copy(tmp_path, {"fixloop.service": text}), "fixloop.service")
    assert "Unknown key 'ProtectSytem'" in result.stderr


@pytest.mark.parametrize(
    "name, threshold",
    [(n, 20) for n in PYTHON_SERVICES] + [("fixloop-llama.service", 20), ("fixloop-vllm.service", 40)],
)
def test_security_exposure_stays_low(tmp_path, name, threshold):
    # Exposure is 0-100 in tenths of the 0.0-10.0 score systemd prints; the vLLM unit keeps GPU access.
    unit_dir = installed_copy(tmp_path)
    result = subprocess.run(
        [
            systemd_tool("systemd-analyze"),
            "security",
            "--offline=true",
            f"--threshold={threshold}",
            str(unit_dir / name),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stdout[-400:] + result.stderr


def test_vllm_serves_with_prefix_caching_structured_outputs_and_the_pinned_model():
    (exec_start,) = values("fixloop-vllm.service", "Service", "ExecStart")
    argv = exec_start.split()
    assert argv[:2] == [VLLM_BIN, "serve"]
    assert "--enable-prefix-caching" in argv
    assert argv[argv.index("--structured-outputs-config.backend") + 1] == "xgrammar"
    # The pinned snapshot itself, so /v1/models reports the revision `fixloop doctor` checks.
    assert argv[2] == "${FIXLOOP_VLLM_MODEL_DIR}/snapshots/${FIXLOOP__LLM__REVISION}"
    # Served under the very name fixloop asks for, from the same env file.
    assert argv[argv.index("--served-model-name") + 1] == "${FIXLOOP_LLM_MODEL}"
    for flag in ("--quantization", "--max-model-len", "--max-num-seqs", "--gpu-memory-utilization", "--host", "--port"):
        assert flag in argv, flag


def test_every_variable_a_unit_uses_is_set_in_the_env_file():
    env = env_example()
    for name in SERVICES:
        assert values(name, "Service", "EnvironmentFile") == ["/etc/fixloop/fixloop.env"], name
        own = {word.partition("=")[0] for word in words(name, "Service", "Environment")}
        commands = values(name, "Service", "ExecStartPre") + values(name, "Service", "ExecStart")
        used = set(re.findall(r"\$\{(\w+)\}", " ".join(commands)))
        assert used <= set(env) | own, f"{name} uses unset {sorted(used - set(env) - own)}"


def test_env_file_pins_a_revision_and_drives_fixloops_config():
    env = env_example()
    assert re.fullmatch(r"[0-9a-f]{40}", env["FIXLOOP__LLM__REVISION"]), "the revision must be a full commit hash"
    assert env["FIXLOOP_LLM_URL"].endswith("/v1")
    # The same file, read by fixloop's own loader, yields the served name and the pinned revision.
    config = load_config(env=env)
    assert config.llm.model == env["FIXLOOP_LLM_MODEL"]
    assert config.llm.revision == env["FIXLOOP__LLM__REVISION"]
    assert config.llm.url == env["FIXLOOP_LLM_URL"]
    assert config.llm.structured_outputs == env["FIXLOOP__LLM__STRUCTURED_OUTPUTS"]
    assert 0 < float(env["FIXLOOP_VLLM_GPU_MEMORY_UTILIZATION"]) < 1
    assert int(env["FIXLOOP_VLLM_MAX_MODEL_LEN"]) > config.loop.max_tokens


def test_api_survives_a_dead_vllm():
    assert "fixloop-vllm.service" in words("fixloop.service", "Unit", "Wants")
    assert "fixloop-vllm.service" in words("fixloop.service", "Unit", "After")
    for key in (*HARD_DEPENDENCIES, "PartOf"):
        assert "fixloop-vllm.service" not in words("fixloop.service", "Unit", key), key
    assert "fixloop.service" not in words("fixloop-vllm.service", "Unit", "PropagatesStopTo")


def test_no_unit_hard_depends_on_another_so_one_outage_stays_contained():
    for name in UNITS:
        for key in HARD_DEPENDENCIES:
            assert not words(name, "Unit", key), f"{name} has {key}="
    # The target pulls everything in softly; an opt-in unit joins it when enabled, and goes with it.
    assert words("fixloop.target", "Unit", "Wants") == set(SERVICES) - set(OPT_IN_SERVICES)
    for name in OPT_IN_SERVICES:
        assert words(name, "Install", "WantedBy") == {"fixloop.target"}, name
        assert words(name, "Unit", "PartOf") == {"fixloop.target"}, name


@pytest.mark.parametrize("name", SERVICES)
def test_service_is_hardened_restarts_and_logs_to_journald(name):
    service = dict(parse_unit(name)["Service"])
    expected = {
        "Type": "exec",
        "User": "fixloop",
        "NoNewPrivileges": "yes",
        "CapabilityBoundingSet": "",
        "ProtectSystem": "strict",
        "ProtectHome": "yes",
        "PrivateTmp": "yes",
        "ProtectKernelModules": "yes",
        "RestrictSUIDSGID": "yes",
        "Restart": "on-failure",
        "StandardOutput": "journal",
        "StandardError": "journal",
    }
    for key, value in expected.items():
        assert service.get(key) == value, f"{name}: {key}={service.get(key)!r}, want {value!r}"
    assert service.get("StateDirectory"), name
    assert service.get("RestartSec"), name
    assert "HF_HUB_OFFLINE=1" in words(name, "Service", "Environment"), name
    assert dict(parse_unit(name)["Unit"]).get("StartLimitIntervalSec") == "0", f"{name} must never stop restarting"


def test_api_has_file_descriptors_for_its_connection_limit_and_its_own_files():
    from edge.service.connections import FD_RESERVE

    limit = values("fixloop.service", "Service", "LimitNOFILE")
    assert limit, "fixloop.service needs LimitNOFILE: the default soft limit (1024) is below max_connections"
    # Soft and hard alike: the unit's SystemCallFilter (~@resources) keeps the service from raising its own.
    assert ":" not in limit[0]
    assert int(limit[0]) >= load_config(env={}).service.max_connections + FD_RESERVE


def test_python_services_have_no_devices_and_vllm_keeps_the_gpu():
    for name in PYTHON_SERVICES:
        assert dict(parse_unit(name)["Service"]).get("PrivateDevices") == "yes", name
        assert values(name, "Service", "StateDirectory") == ["fixloop"], name
    vllm = dict(parse_unit("fixloop-vllm.service")["Service"])
    # PrivateDevices hides /dev/nvidia*; ProtectClock and DevicePolicy imply a device allow-list.
    for key in ("PrivateDevices", "ProtectClock", "DevicePolicy", "PrivateUsers"):
        assert key not in vllm, f"fixloop-vllm.service must not set {key}= (GPU access)"


def test_llama_server_serves_the_checked_model_under_fixloops_name_with_room_per_slot():
    (exec_start,) = values("fixloop-llama.service", "Service", "ExecStart")
    argv = exec_start.split()
    assert argv[0] == LLAMA_BIN

    def flag(name: str) -> str:
        return argv[argv.index(name) + 1]

    assert flag("-m") == "${FIXLOOP_LLAMA_MODEL}"
    # Served under the very name fixloop asks for, from the same env file.
    assert flag("--alias") == "${FIXLOOP_LLM_MODEL}"
    for name, variable in (
        ("-c", "CTX_SIZE"),
        ("--parallel", "PARALLEL"),
        ("-t", "THREADS"),
        ("--host", "HOST"),
        ("--port", "PORT"),
    ):
        assert flag(name) == f"${{FIXLOOP_LLAMA_{variable}}}", name
    # The GGUF is the pin: its checksum is checked before the server starts, and the example's is a placeholder.
    (check,) = values("fixloop-llama.service", "Service", "ExecStartPre")
    assert "${FIXLOOP_LLAMA_MODEL_SHA256}  ${FIXLOOP_LLAMA_MODEL}" in check and "sha256sum --check" in check
    env = env_example()
    assert re.fullmatch(r"[0-9a-f]{64}", env["FIXLOOP_LLAMA_MODEL_SHA256"])
    # -c is split among the slots: each needs the profile's context and one more observation and reply.
    per_slot = int(env["FIXLOOP_LLAMA_CTX_SIZE"]) // int(env["FIXLOOP_LLAMA_PARALLEL"])
    cpu_3b = BUILT_IN_PROFILES["cpu-3b"]
    assert per_slot >= cpu_3b.context_tokens + cpu_3b.max_tokens_per_step + 2000
    assert env["FIXLOOP_LLAMA_HOST"] == "127.0.0.1"
    assert env["FIXLOOP_LLAMA_PORT"] not in {env["FIXLOOP_VLLM_PORT"], str(load_config(env={}).service.port)}
    service = dict(parse_unit("fixloop-llama.service")["Service"])
    assert service.get("PrivateDevices") == "yes", "the CPU server needs no devices"


def test_units_run_commands_the_fixloop_cli_has():
    parser = build_parser()
    for name in PYTHON_SERVICES:
        (exec_start,) = values(name, "Service", "ExecStart")
        binary, *argv = exec_start.split()
        assert binary == FIXLOOP_BIN
        assert getattr(parser.parse_args(argv), "func", None), f"{name}: `fixloop {' '.join(argv)}` has no handler"


def test_sysusers_file_creates_the_service_user(tmp_path):
    (tmp_path / "etc").mkdir()
    result = subprocess.run(
        [systemd_tool("systemd-sysusers"), f"--root={tmp_path}", str(SYSUSERS)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    passwd = (tmp_path / "etc" / "passwd").read_text(encoding="utf-8")
    (entry,) = [line for line in passwd.splitlines() if line.startswith("fixloop:")]
    assert entry.split(":")[5] == "/var/lib/fixloop"
