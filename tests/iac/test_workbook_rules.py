"""The project checker knows the operator's workbook (infra/modules/workbook.bicep): breaking it in a
copy of the repository fails `python -m harness.tools.iac`, naming what broke."""

from pathlib import Path

from tests.support.iac import assert_fails, edit, needs_bicep

WORKBOOK = "infra/modules/workbook.bicep"


@needs_bicep
def test_the_workbook_linked_to_another_resource_fails(root: Path, clean: Path) -> None:
    edit(root / WORKBOOK, "sourceId: applicationInsightsId", "sourceId: serviceBusId")
    assert_fails(root, "sourceId is not the id of an Application Insights component", clean=clean)


@needs_bicep
def test_a_workbook_outside_the_workbooks_category_fails(root: Path, clean: Path) -> None:
    edit(root / WORKBOOK, "category: 'workbook'", "category: 'sentinel'")
    assert_fails(root, "properties.category is", "must be", clean=clean)


@needs_bicep
def test_a_placeholder_left_unfilled_fails(root: Path, clean: Path) -> None:
    edit(
        root / WORKBOOK,
        "var content = replace(withThreshold, '__MAX_IN_FLIGHT__', maxInFlight)",
        "var content = withThreshold",
    )
    assert_fails(root, "workbook placeholder __MAX_IN_FLIGHT__ is never filled in", clean=clean)


@needs_bicep
def test_an_instrumentation_key_in_the_workbook_fails(root: Path, clean: Path) -> None:
    path = root / "infra/workbooks/operator.workbook.json"
    edit(path, '"version": "Notebook/1.0",', '"version": "Notebook/1.0", "InstrumentationKey": "x",')
    assert_fails(root, "an Application Insights instrumentation key", clean=clean)


@needs_bicep
def test_no_workbook_deployed_fails(root: Path, clean: Path) -> None:
    path = root / "infra/main.bicep"
    text = path.read_text()
    start = text.index("module workbook 'modules/workbook.bicep'")
    end = text.index("\n}\n", start) + 3
    path.write_text(text[:start] + text[end:])
    assert_fails(root, "no Microsoft.Insights/workbooks deployed", clean=clean)
