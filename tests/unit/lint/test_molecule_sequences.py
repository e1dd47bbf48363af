"""Every Molecule scenario runs the playbooks it has: a step's playbook (``side_effect.yml``, ``prepare.yml``, ...) that
is in the scenario's directory or named under ``ansible.playbooks`` is run only when its step is in the scenario's
``test_sequence`` (its own, else the shared one in molecule/_shared/config.yml). A playbook without its step is a test
that never runs while the scenario passes, and a step without a playbook runs nothing."""

from __future__ import annotations

import pathlib

import pytest
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[3]
MOLECULE = ROOT / "molecule"
# the steps whose playbook a scenario may bring; converge and verify always run in the shared sequence
STEPS = ("prepare", "side_effect", "cleanup", "converge", "verify")
SCENARIOS = sorted(p.parent.name for p in MOLECULE.glob("*/molecule.yml"))


def _load(path):
    return yaml.safe_load(path.read_text(encoding="utf-8")) or {}


def _sequence(config):
    return ((config.get("scenario") or {}).get("test_sequence")
            or _load(MOLECULE / "_shared" / "config.yml")["scenario"]["test_sequence"])


def _own_playbooks(name, config):
    """The steps whose playbook this scenario brings: a file named after the step, or one named in its config."""
    named = set(((config.get("provisioner") or {}).get("playbooks") or {})
                | ((config.get("ansible") or {}).get("playbooks") or {}))
    return {step for step in STEPS if (MOLECULE / name / (step + ".yml")).is_file() or step in named}


def test_the_scenarios_are_found():
    assert len(SCENARIOS) >= 17 and "site" in SCENARIOS and "fleet" in SCENARIOS


@pytest.mark.parametrize("name", SCENARIOS)
def test_each_playbook_of_a_scenario_has_its_step_in_the_sequence(name):
    config = _load(MOLECULE / name / "molecule.yml")
    sequence = _sequence(config)
    missing = sorted(step for step in _own_playbooks(name, config) if step not in sequence)
    assert missing == [], "molecule/%s has a playbook for %s, but its test_sequence %s never runs it" % (
        name, missing, sequence)
    if "side_effect" in sequence:
        assert "side_effect" in _own_playbooks(name, config), (
            "molecule/%s runs side_effect without a side_effect playbook" % name)
