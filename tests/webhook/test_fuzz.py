"""The fuzz harness's short seeded run against ``draguard serve --demo`` (benchmarks/fuzz.py
--quick): hostile and valid requests on every path, and whatever they are, an answer.

Only what must hold on any machine is asserted here; latencies and memory are the harness's own
report (benchmarks/README.md), read by people.
"""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_hostile_requests_get_answers_never_a_5xx_or_a_dropped_connection(tmp_path: Path) -> None:
    report = tmp_path / "fuzz.json"
    command = [sys.executable, str(ROOT / "benchmarks" / "fuzz.py"), "--quick", "--json", str(report)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert report.exists(), done.stdout + done.stderr
    result = json.loads(report.read_text())
    shown = done.stdout[-4000:]
    assert result["requests"] == 400, shown
    families = result["histogram"]
    assert set(families) >= {"valid", "mutated", "cel", "dryrun", "bytes", "encoding", "misc"}, shown
    assert result["log"]["server_exited_during_the_run"] is None, shown
    assert result["log"]["stopped_on_sigterm"], shown
    assert result["status_5xx"] == 0, shown
    assert result["could_not_process"] == 0, shown
    assert result["dropped"] == [], shown
    assert result["log"]["tracebacks"] == 0, shown
    assert result["probe"]["failed"] == 0 and result["probe"]["samples"] > 0, shown
