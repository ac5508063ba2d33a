"""`ParameterValueDistribution`: one scenario file, many parameter sets (named variants).

- Deterministic: the cartesian product of the single-parameter distributions (`DistributionSet`
  elements; `DistributionRange` from the lower limit by `stepWidth` up to the upper one, inclusive
  within 1e-6) and the multi-parameter value sets, the last distribution varying fastest (esmini's
  order, `OSCParameterDistribution.cpp`). Variant names are `name-value_name-value...`, made safe
  file names (`avsim.core.names.safe_name`: other characters become `_`, at most 100 characters).
- Stochastic (esmini does not run these): `numberOfTestRuns` draws of every distribution, in file
  order, from numpy's PCG64 seeded by the bits of `randomSeed` (0 when absent): normal (with
  `variance`), log-normal (the distribution's own expected value and variance), uniform, Poisson,
  histogram (a bin by weight, then uniform in it) and probability sets (an element by weight);
  a `Range` truncates by redrawing (at most 1000 times). Variant names are `run-<k>` (k from 1).
  Same file, same draws; they are not esmini's or any other tool's draws.

Every value is a string, as parameter values are; at most `MAX_VARIANTS` variants.
"""

from __future__ import annotations

import itertools
import math
import struct
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from avsim.core.errors import AvsimInputError
from avsim.core.names import safe_name
from avsim.scenario.openscenario.expressions import format_number
from avsim.scenario.openscenario.parse import parse_file
from avsim.scenario.openscenario.reader import XoscReader
from avsim.scenario.openscenario.sources import FolderSources

MAX_VARIANTS = 1000
MAX_DRAWS = 1000


@dataclass(frozen=True)
class Variant:
    name: str
    parameters: dict[str, str]


@dataclass(frozen=True)
class Distribution:
    """The scenario file a distribution varies and its parameter sets."""

    scenario_path: Path
    variants: tuple[Variant, ...]
    stochastic: bool


def _values(r: XoscReader, e: ET.Element) -> list[list[tuple[str, str]]]:
    """The value sets of one deterministic distribution."""
    with r.at(e):
        if e.tag == "DeterministicMultiParameterDistribution":
            vsd = r.need(e, "ValueSetDistribution")
            out = []
            for vs in vsd.findall("ParameterValueSet"):
                out.append([(r.raw(a, "parameterRef").lstrip("$"), r.text(a, "value")) for a in vs.findall("ParameterAssignment")])
            return out
        if e.tag != "DeterministicSingleParameterDistribution":
            raise r.unsupported(e)
        name = r.raw(e, "parameterName").lstrip("$")
        kind = r.choice(e)
        with r.at(kind):
            if kind.tag == "DistributionSet":
                return [[(name, r.text(x, "value"))] for x in kind.findall("Element")]
            if kind.tag == "DistributionRange":
                step = r.num(kind, "stepWidth", positive=True)
                rng = r.need(kind, "Range")
                lo, hi = r.num(rng, "lowerLimit"), r.num(rng, "upperLimit")
                if hi < lo:
                    raise r.fail(f"upperLimit {hi:g} is below lowerLimit {lo:g}", "Range")
                n = int(math.floor((hi - lo) / step + 1e-6)) + 1
                if n > MAX_VARIANTS:
                    raise r.fail(f"{n} values, more than {MAX_VARIANTS}")
                return [[(name, format_number(lo + k * step))] for k in range(n)]
            raise r.unsupported(kind)


def _deterministic(r: XoscReader, e: ET.Element) -> list[Variant]:
    lists = [_values(r, c) for c in e]
    count = math.prod(len(v) for v in lists) if lists else 0
    if count > MAX_VARIANTS:
        raise r.fail(f"{count} parameter sets, more than {MAX_VARIANTS}")
    out: list[Variant] = []
    for combo in itertools.product(*lists):
        params = dict(kv for group in combo for kv in group)
        name = "_".join(f"{k}-{v}" for k, v in params.items())
        out.append(Variant(safe_name(name or f"set-{len(out) + 1}"), params))
    return out


def _range(r: XoscReader, e: ET.Element) -> tuple[float, float] | None:
    rng = e.find("Range")
    return None if rng is None else (r.num(rng, "lowerLimit"), r.num(rng, "upperLimit"))


def _draw(r: XoscReader, e: ET.Element, rng: np.random.Generator) -> str:
    """One value of a stochastic distribution element."""
    with r.at(e):
        limits = _range(r, e)
        if e.tag == "ProbabilityDistributionSet":
            elements = e.findall("Element")
            weights = np.array([r.num(x, "weight", nonneg=True) for x in elements])
            if not len(elements) or weights.sum() <= 0:
                raise r.fail("needs elements with positive total weight")
            return r.text(elements[int(rng.choice(len(elements), p=weights / weights.sum()))], "value")
        if e.tag == "Histogram":
            bins = e.findall("Bin")
            weights = np.array([r.num(b, "weight", nonneg=True) for b in bins])
            if not len(bins) or weights.sum() <= 0:
                raise r.fail("needs bins with positive total weight")
            lo, hi = _range(r, bins[int(rng.choice(len(bins), p=weights / weights.sum()))]) or (0.0, 0.0)
            return format_number(float(rng.uniform(lo, hi)))
        if e.tag == "UniformDistribution":
            lo, hi = limits or (0.0, 0.0)
            return format_number(float(rng.uniform(lo, hi)))
        sample = _sampler(r, e, rng)
        for _ in range(MAX_DRAWS):
            v = sample()
            if limits is None or limits[0] <= v <= limits[1]:
                return format_number(v)
        raise r.fail(f"no draw within the Range in {MAX_DRAWS} tries", "Range")


def _sampler(r: XoscReader, e: ET.Element, rng: np.random.Generator):  # type: ignore[no-untyped-def]
    if e.tag == "NormalDistribution":
        mean, var = r.num(e, "expectedValue"), r.num(e, "variance", nonneg=True)
        return lambda: float(rng.normal(mean, math.sqrt(var)))
    if e.tag == "LogNormalDistribution":
        mean, var = r.num(e, "expectedValue", positive=True), r.num(e, "variance", nonneg=True)
        sigma2 = math.log(1 + var / mean**2)
        return lambda: float(rng.lognormal(math.log(mean) - sigma2 / 2, math.sqrt(sigma2)))
    if e.tag == "PoissonDistribution":
        lam = r.num(e, "expectedValue", nonneg=True)
        return lambda: float(rng.poisson(lam))
    raise r.unsupported(e)


def _stochastic(r: XoscReader, e: ET.Element) -> list[Variant]:
    runs = r.int_(e, "numberOfTestRuns")
    if not 1 <= runs <= MAX_VARIANTS:
        raise r.fail(f"expected 1 to {MAX_VARIANTS} runs", "@numberOfTestRuns")
    seed = struct.unpack("<Q", struct.pack("<d", r.num(e, "randomSeed", 0.0)))[0]
    rng = np.random.Generator(np.random.PCG64(seed))
    dists = []
    for d in e.findall("StochasticDistribution"):
        with r.at(d):
            dists.append((r.raw(d, "parameterName").lstrip("$"), r.choice(d)))
    width = len(str(runs))
    return [Variant(f"run-{k + 1:0{width}d}", {name: _draw(r, kind, rng) for name, kind in dists}) for k in range(runs)]


def read_distribution(sources: FolderSources) -> Distribution:
    """The parameter sets of a `ParameterValueDistribution` file (see the module docstring).

    Args:
        sources: the distribution file and its folder.

    Returns:
        The scenario file (inside the sources' root) and the variants.
    """
    f = parse_file(sources)
    r = XoscReader(f.name, sources)
    pvd = r.need(f.root, "ParameterValueDistribution")
    with r.at(pvd):
        scenario = r.text(r.need(pvd, "ScenarioFile"), "filepath")
        path = sources.base / scenario.replace("\\", "/")
        sources.key(scenario, "ScenarioFile")  # refused when it leads out of the root
        det, sto = pvd.find("Deterministic"), pvd.find("Stochastic")
        if (det is None) == (sto is None):
            raise r.fail("expected one Deterministic or Stochastic element")
        if det is not None:
            with r.at(det):
                variants, stochastic = _deterministic(r, det), False
        else:
            assert sto is not None
            with r.at(sto):
                variants, stochastic = _stochastic(r, sto), True
    if not variants:
        raise AvsimInputError(f.name, "ParameterValueDistribution", "no parameter set")
    names = [v.name for v in variants]
    if len(set(names)) != len(names):
        variants = [Variant(safe_name(f"{v.name}-{k + 1}"), v.parameters) for k, v in enumerate(variants)]
    return Distribution(path, tuple(variants), stochastic)
