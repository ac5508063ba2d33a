"""ASAM OpenSCENARIO 1.x (.xosc): reading a scenario (`parse`), running its storyboard on its
OpenDRIVE road network at a fixed rate (`engine`), recording the run as an avsim scenario
(`record`), and parameter distributions (`distribution`). docs/editing.md lists what is supported,
element by element; `avsim.scenario.importers.openscenario` is `avsim convert --from openscenario`.
"""
