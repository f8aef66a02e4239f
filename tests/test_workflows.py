"""The GitHub workflow files parse and do what the README says they do."""

from pathlib import Path

import pytest
import yaml

WORKFLOWS = Path(__file__).resolve().parents[1] / ".github" / "workflows"


def order_of(job: dict, name: str) -> int:
    return [s.get("id") or s.get("name") for s in job["steps"]].index(name)


def load(name: str) -> dict:
    data = yaml.safe_load((WORKFLOWS / name).read_text())
    # YAML 1.1 reads the key `on` as the boolean True.
    data["on"] = data.pop(True, data.get("on"))
    return data


def run_lines(job: dict) -> str:
    return "\n".join(step.get("run", "") for step in job["steps"])


@pytest.mark.parametrize("name", ["nightly-gpu.yml", "ci.yml"])
def test_workflow_structure(name):
    workflow = load(name)
    assert workflow["name"] and workflow["on"] and workflow["jobs"]
    for job in workflow["jobs"].values():
        assert job["runs-on"] and job["steps"]
        for step in job["steps"]:
            assert ("uses" in step) != ("run" in step), f"{name}: a step needs exactly one of uses/run: {step}"


def test_nightly_is_scheduled_on_a_gpu_runner_with_strict_weights():
    workflow = load("nightly-gpu.yml")
    cron = workflow["on"]["schedule"][0]["cron"]
    assert len(cron.split()) == 5
    (job,) = workflow["jobs"].values()
    assert {"self-hosted", "gpu"} <= set(job["runs-on"])
    commands = run_lines(job)
    assert "modelval models fetch --all" in commands
    assert "-m modelval_weights" in commands and "--modelval-device cuda" in commands
    assert "--modelval-report-dir" in commands
    assert job["env"]["MODELVAL_STRICT_WEIGHTS"] == "1"
    cached = next(s for s in job["steps"] if s.get("uses", "").startswith("actions/cache"))["with"]["path"]
    for path in ("checkpoints", ".cache/torch", ".cache/huggingface"):
        assert path in cached
    assert {"TORCH_HOME", "HF_HOME", "MODELVAL_CHECKPOINT_DIR"} <= job["env"].keys()
    assert any(s.get("uses", "").startswith("actions/upload-artifact") for s in job["steps"])
    # the GPU tier runs before the zoo, so a broken GPU path stops the job first
    names = [step.get("name", "") for step in job["steps"]]
    gpu = next(i for i, step in enumerate(job["steps"]) if "make test-gpu" in step.get("run", ""))
    assert gpu < names.index("Weight-needing validation cases on the GPU")


def test_the_nightly_gives_a_verdict_on_change_from_its_own_session():
    """The validation step may fail (known failures are expected), its failures are rerun once in the same
    session, and the verdict step decides the job against the committed status file, which parses."""
    from modelval.judgement.nightly import read_status_file

    (job,) = load("nightly-gpu.yml")["jobs"].values()
    steps = {step.get("id") or step.get("name"): step for step in job["steps"]}
    validation = steps["validation"]
    assert validation["continue-on-error"] is True and "-m modelval_weights" in validation["run"]
    rerun = next(s for s in job["steps"] if "--last-failed" in s.get("run", ""))
    assert rerun["if"] == "steps.validation.outcome == 'failure'"
    verdict = next(s for s in job["steps"] if "modelval runs verdict" in s.get("run", ""))
    assert "continue-on-error" not in verdict and "if" not in verdict  # it decides the job
    last = verdict["run"].strip().splitlines()[-1]
    assert "--status .github/nightly-status.toml" in last and "--report-dir reports/nightly/page" in last
    page = steps["page"]  # issue 41: the page is an artifact of its own, linked from the job summary
    assert page["with"]["path"] == "reports/nightly/page" and page["if"] == "always()"
    summary = next(s for s in job["steps"] if "GITHUB_STEP_SUMMARY" in s.get("run", ""))
    assert "steps.page.outputs.artifact-url" in summary["run"] and "reports/nightly/page/verdict.md" in summary["run"]
    assert order_of(job, "page") < order_of(job, summary["name"])
    assert "--json > reports/nightly/verdict.json" in verdict["run"]
    assert "${{ github.run_id }}" in job["env"]["MODELVAL_SESSION"]
    order = [s.get("id") or s.get("name") for s in job["steps"]]
    assert order.index("validation") < order.index(rerun["name"]) < order.index(verdict["name"])
    statuses = read_status_file(WORKFLOWS.parent / "nightly-status.toml")
    assert statuses and all(configuration.endswith("/cuda/fp32") for _, configuration in statuses)


def test_pull_request_workflow_runs_the_default_suite_on_cpu():
    workflow = load("ci.yml")
    assert "pull_request" in workflow["on"]
    (job,) = workflow["jobs"].values()
    assert "make test" in run_lines(job)
    assert "gpu" not in str(job["runs-on"])
