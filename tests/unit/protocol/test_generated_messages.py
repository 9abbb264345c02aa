"""protocol/messages.py is exactly what the generator makes from the shared message definitions."""

from __future__ import annotations

from pathlib import Path

from protocol.generate import main as generate

ROOT = Path(__file__).resolve().parents[3]
# CI clones the project with the shared folder beside it, as on a developer's machine.
DEFINITIONS = ROOT.parent / "shared" / "kafka-protocol" / "message"


def test_generated_module_is_up_to_date(tmp_path):
    out = tmp_path / "messages.py"
    generate([str(DEFINITIONS), str(out)])
    assert out.read_text() == (ROOT / "protocol" / "messages.py").read_text()
