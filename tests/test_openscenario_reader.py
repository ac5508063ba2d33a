"""Reading OpenSCENARIO files: parameters and expressions, catalogs, element paths in one-line
errors, unsupported elements named, hostile files refused, embedded files bounded, distributions."""

from __future__ import annotations

import base64
import json
import zlib
from pathlib import Path

import numpy as np
import openscenario_examples as ex
import pytest

from avsim.core.errors import AvsimInputError
from avsim.scenario.openscenario.distribution import read_distribution
from avsim.scenario.openscenario.expressions import ExpressionError, evaluate, resolve
from avsim.scenario.openscenario.load import RunOptions, load_scenario_files
from avsim.scenario.openscenario.model import LanePosition, SpeedAction
from avsim.scenario.openscenario.parse import read_scenario
from avsim.scenario.openscenario.sources import EmbeddedSources, FolderSources, embed_sources

HEADER = '<FileHeader revMajor="1" revMinor="2" date="2024-01-01T00:00:00" description="t" author="avsim"/>'


def _scenario(body_params: str = "", init: str = "", story: str = "", entities: str | None = None, header: str = HEADER,
              road: str = '<LogicFile filepath="../xodr/e6mini.xodr"/>', catalog: str = "../xosc/Catalogs/Vehicles") -> str:  # fmt: skip
    entities = entities if entities is not None else '<ScenarioObject name="Ego"><CatalogReference catalogName="VehicleCatalog" entryName="car_white"/></ScenarioObject>'
    return (f'<?xml version="1.0"?><OpenSCENARIO>{header}<ParameterDeclarations>{body_params}</ParameterDeclarations>'
            f'<CatalogLocations><VehicleCatalog><Directory path="{catalog}"/></VehicleCatalog></CatalogLocations>'
            f'<RoadNetwork>{road}</RoadNetwork><Entities>{entities}</Entities>'
            f'<Storyboard><Init><Actions>{init}</Actions></Init>{story}</Storyboard></OpenSCENARIO>')  # fmt: skip


SPEED = ('<Private entityRef="Ego"><PrivateAction><LongitudinalAction><SpeedAction><SpeedActionDynamics dynamicsShape="step" '
         'value="0" dynamicsDimension="time"/><SpeedActionTarget><AbsoluteTargetSpeed value="{v}"/></SpeedActionTarget></SpeedAction>'
         '</LongitudinalAction></PrivateAction><PrivateAction><TeleportAction><Position><LanePosition roadId="0" laneId="{lane}" s="{s}"/>'
         '</Position></TeleportAction></PrivateAction></Private>')  # fmt: skip


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("xosc_reader")
    ex.write_resources(folder)
    return folder


def _write(root: Path, name: str, text: str) -> Path:
    path = root / "xosc" / name
    path.write_text(text, encoding="utf-8")
    return path


def _read(root: Path, path: Path, **overrides: str):  # type: ignore[no-untyped-def]
    return read_scenario(FolderSources(path, root), overrides)


# ---- expressions ---------------------------------------------------------------------------------
@pytest.mark.parametrize(("text", "value"), [("1 + 2 * 3", 7.0), ("(1 + 2) * 3", 9.0), ("-2 * -3", 6.0), ("7 % 3", 1.0), ("$a / 4", 2.5),
                                             ("round(2.5)", 3.0), ("floor(-1.5)", -2.0), ("ceil(1.2)", 2.0), ("sqrt(16)", 4.0),
                                             ("pow(2, 10)", 1024.0), ("$a > 5 and not ($a == 3)", 1.0), ("false or 1 <= 0", 0.0),
                                             ("$flag + 1", 2.0), ("250 / 3.6", 250 / 3.6)])  # fmt: skip
def test_expressions_follow_the_standard_grammar(text: str, value: float) -> None:
    params = {"a": "10", "flag": "true"}
    assert evaluate(text, params.__getitem__) == pytest.approx(value, rel=1e-15)


@pytest.mark.parametrize("text", ["1 / 0", "$missing + 1", "1 +", "sqrt(-1)", "pow(2)", "2 ** 3", "__import__('os')", "x" * 2000])
def test_bad_expressions_are_errors_not_code(text: str) -> None:
    with pytest.raises(ExpressionError):
        evaluate(text, {"a": "1"}.__getitem__)


def test_references_and_expressions_resolve_as_written() -> None:
    lookup = {"Speed": "27.5", "Name": "car_red"}.__getitem__
    assert resolve("$Speed", lookup) == "27.5" and resolve("${$Speed * 2}", lookup) == "55" and resolve("plain", lookup) == "plain"
    assert resolve("$Name", lookup) == "car_red" and resolve("${1/4}", lookup) == "0.25"


# ---- parameters, catalogs ------------------------------------------------------------------------
def test_parameters_overrides_and_catalog_entries(root: Path) -> None:
    params = ('<ParameterDeclaration name="$Speed" parameterType="double" value="12"/>'
              '<ParameterDeclaration name="Lane" parameterType="int" value="${-1 - 2}"/>')  # fmt: skip
    path = _write(root, "params.xosc", _scenario(params, SPEED.format(v="${$Speed + 1}", lane="$Lane", s="30")))
    doc = _read(root, path)
    assert doc.parameters == {"Speed": "12", "Lane": "-3"}
    speed = doc.storyboard.init[0].action
    assert isinstance(speed, SpeedAction) and speed.target.value == 13.0  # type: ignore[union-attr]
    teleport = doc.storyboard.init[1].action
    assert isinstance(teleport.position, LanePosition) and teleport.position.lane == -3  # type: ignore[union-attr]
    again = _read(root, path, Speed="20")
    assert again.storyboard.init[0].action.target.value == 21.0  # type: ignore[union-attr]
    ego = doc.entities[0]  # car_white from the catalog, its limits from the entry's own parameters
    assert ego.catalog_entry == "VehicleCatalog:car_white" and ego.bbox.length == 5.04 and ego.performance.max_acceleration == 5.0
    with pytest.raises(AvsimInputError, match="no global parameter named Nope"):
        _read(root, path, Nope="1")


def test_constraint_groups_are_checked(root: Path) -> None:
    params = ('<ParameterDeclaration name="Speed" parameterType="double" value="80"><ConstraintGroup>'
              '<ValueConstraint rule="lessOrEqual" value="50"/></ConstraintGroup></ParameterDeclaration>')  # fmt: skip
    path = _write(root, "constrained.xosc", _scenario(params))
    with pytest.raises(AvsimInputError, match="violates its ConstraintGroup"):
        _read(root, path)
    assert _read(root, path, Speed="40").parameters["Speed"] == "40"


# ---- errors: one line naming file and element ------------------------------------------------------
EVENT = ('<Story name="s"><Act name="a"><ManeuverGroup name="g" maximumExecutionCount="1"><Actors selectTriggeringEntities="false">'
         '<EntityRef entityRef="Ego"/></Actors><Maneuver name="m"><Event name="e" priority="override"><Action name="x"><PrivateAction>'
         '{action}</PrivateAction></Action></Event></Maneuver></ManeuverGroup></Act></Story>')  # fmt: skip


@pytest.mark.parametrize(("action", "element"), [
    ('<LongitudinalAction><LongitudinalDistanceAction entityRef="Ego" freespace="true" continuous="true" distance="5"/></LongitudinalAction>',
     "LongitudinalDistanceAction"),
    ('<SynchronizeAction masterEntityRef="Ego"/>', "SynchronizeAction"),
    ('<LateralAction><LateralDistanceAction entityRef="Ego" freespace="true" continuous="true"/></LateralAction>', "LateralDistanceAction"),
    ('<RoutingAction><AcquirePositionAction/></RoutingAction>', "AcquirePositionAction"),
])  # fmt: skip
def test_unsupported_actions_are_one_line_naming_the_element(root: Path, action: str, element: str) -> None:
    path = _write(root, "unsupported.xosc", _scenario(story=EVENT.format(action=action)))
    with pytest.raises(AvsimInputError) as info:
        _read(root, path)
    message = str(info.value)
    assert "\n" not in message and message.startswith(str(path))
    assert "Story[s]/Act[a]/ManeuverGroup[g]/Maneuver[m]/Event[e]/Action[x]/PrivateAction/" in message
    assert f"{element}: {element} is not supported" in message and message.count(f"{element}/{element}") == 0


@pytest.mark.parametrize(("text", "field", "reason"), [
    ('<!DOCTYPE x [<!ENTITY a "b">]><OpenSCENARIO/>', "line 1", "DOCTYPE"),
    ("<OpenSCENARIO><FileHeader", "line 1", "not well-formed"),
    ("<OpenDRIVE/>", "root", "expected an <OpenSCENARIO>"),
    (_scenario(header=HEADER.replace('revMajor="1"', 'revMajor="2"')), "FileHeader", "avsim reads OpenSCENARIO 1.0 to 1.3"),
    (_scenario(road='<LogicFile filepath="../../outside.xodr"/>'), "LogicFile", "leads outside"),
    (_scenario(road='<LogicFile filepath="/etc/passwd"/>'), "LogicFile", "leads outside"),
    (_scenario(road=""), "LogicFile", "names no OpenDRIVE road network"),
    (_scenario(init=SPEED.format(v="fast", lane="-3", s="1")), "AbsoluteTargetSpeed/@value", "expected a number"),
    (_scenario(init=SPEED.format(v="1e400", lane="-3", s="1")), "AbsoluteTargetSpeed/@value", "finite number"),
    (_scenario(init=SPEED.format(v="3", lane="0", s="1")), "LanePosition/@laneId", "centre lane"),
    (_scenario(init=SPEED.format(v="$nope", lane="-3", s="1")), "AbsoluteTargetSpeed/@value", "unknown parameter $nope"),
    (_scenario(entities='<ScenarioObject name="Ego"><CatalogReference catalogName="VehicleCatalog" entryName="car_pink"/></ScenarioObject>'),
     "CatalogReference", "no entry 'car_pink'"),
    (_scenario(entities='<ScenarioObject name="Ego"><ExternalObjectReference name="x"/></ScenarioObject>'), "ExternalObjectReference", "not supported"),
])  # fmt: skip
def test_bad_files_are_one_line_naming_the_field(root: Path, text: str, field: str, reason: str) -> None:
    path = _write(root, "bad.xosc", text)
    with pytest.raises(AvsimInputError) as info:
        load_scenario_files(FolderSources(path, root), RunOptions())
    message = str(info.value)
    assert "\n" not in message and field in message and reason in message


def test_references_stay_inside_the_root(root: Path, tmp_path: Path) -> None:
    inner = root / "xosc" / "sub"
    inner.mkdir(exist_ok=True)
    path = _write(root, "sub/deep.xosc", _scenario(road='<LogicFile filepath="../../xodr/e6mini.xodr"/>', catalog="../Catalogs/Vehicles"))
    with pytest.raises(AvsimInputError, match="leads outside"):  # the default root is the scenario's folder
        load_scenario_files(FolderSources(path), RunOptions())
    assert load_scenario_files(FolderSources(path, root), RunOptions()).ego == "Ego"
    with pytest.raises(AvsimInputError, match="not inside"):
        FolderSources(path, tmp_path)


def test_a_scenario_file_that_is_a_catalog_or_distribution_says_so(root: Path) -> None:
    catalog = root / "xosc" / "Catalogs" / "Vehicles" / "VehicleCatalog.xosc"
    with pytest.raises(AvsimInputError, match="catalog file, not a scenario"):
        read_scenario(FolderSources(catalog, root))


# ---- embedded files -------------------------------------------------------------------------------
def test_embedded_files_are_bounded_and_checked() -> None:
    doc = embed_sources("a.xosc", {"a.xosc": b"<OpenSCENARIO/>", "../xodr/r.xodr": b"<OpenDRIVE/>"})
    src = EmbeddedSources(json.loads(json.dumps(doc)), "s")
    assert src.read("../xodr/r.xodr", "f") == b"<OpenDRIVE/>" and src.read("./a.xosc", "f") == b"<OpenSCENARIO/>"
    tampered = json.loads(json.dumps(doc))
    tampered["files"]["a.xosc"]["sha256"] = "0" * 64
    with pytest.raises(AvsimInputError, match="digest"):
        EmbeddedSources(tampered, "s").read("a.xosc", "f")
    bomb = json.loads(json.dumps(doc))  # a small declared size over 100 MB of zeros: refused after size + 1 bytes
    bomb["files"]["a.xosc"]["zlib_base64"] = [base64.b64encode(zlib.compress(b"\0" * 100_000_000)).decode()]
    with pytest.raises(AvsimInputError, match="different size"):
        EmbeddedSources(bomb, "s").read("a.xosc", "f")
    with pytest.raises(AvsimInputError, match="not among"):
        src.read("../../etc/passwd", "f")


# ---- parameter distributions ----------------------------------------------------------------------
def test_deterministic_distribution_is_the_product_in_esmini_order(root: Path) -> None:
    path = root / "xosc" / "det.xosc"
    path.write_text(
        f'<OpenSCENARIO>{HEADER}<ParameterValueDistribution><ScenarioFile filepath="params.xosc"/><Deterministic>'
        '<DeterministicSingleParameterDistribution parameterName="$Speed"><DistributionRange stepWidth="0.5"><Range lowerLimit="10" upperLimit="11"/>'
        '</DistributionRange></DeterministicSingleParameterDistribution>'
        '<DeterministicMultiParameterDistribution><ValueSetDistribution><ParameterValueSet><ParameterAssignment parameterRef="Lane" value="-2"/>'
        '</ParameterValueSet><ParameterValueSet><ParameterAssignment parameterRef="Lane" value="-4"/></ParameterValueSet></ValueSetDistribution>'
        '</DeterministicMultiParameterDistribution></Deterministic></ParameterValueDistribution></OpenSCENARIO>', encoding="utf-8")  # fmt: skip
    dist = read_distribution(FolderSources(path, root))
    assert [v.parameters for v in dist.variants] == [{"Speed": s, "Lane": lane} for s in ("10", "10.5", "11") for lane in ("-2", "-4")]
    assert dist.variants[1].name == "Speed-10_Lane--4" and not dist.stochastic


def test_stochastic_distribution_draws_are_seeded_and_in_range(root: Path) -> None:
    path = ex.distribution(root)
    a, b = read_distribution(FolderSources(path, root)), read_distribution(FolderSources(path, root))
    assert a.variants == b.variants and len(a.variants) == 50 and a.variants[0].name == "run-01"
    target = np.array([float(v.parameters["targetspeed"]) for v in a.variants])
    ego = np.array([float(v.parameters["egospeed"]) for v in a.variants])
    assert target.min() >= 15 and target.max() <= 35 and abs(ego.mean() - 25) < 0.6 and 0.5 < ego.std() < 1.5
