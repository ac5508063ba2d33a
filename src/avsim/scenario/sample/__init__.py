"""The embedded sample: a seeded, deterministic signalised intersection (`scene`), its road
network (`roads`) and the 10 Hz traffic simulation that drives it (`traffic`)."""

from avsim.scenario.sample.scene import (
    SampleTraffic,
    build_sample_map,
    light_states,
    make_sample_scenario,
    run_sample_traffic,
)

__all__ = ["SampleTraffic", "build_sample_map", "light_states", "make_sample_scenario", "run_sample_traffic"]
