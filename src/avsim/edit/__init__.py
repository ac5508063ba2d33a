"""Scenario editing for scenario authors: declarative edits, variants, validation, diff, preview.

Ops (each returns a new Scenario, never mutating its input): `ops_agents`, `ops_map`,
`ops_lights`, `ops_time`, `ops_ego`; lane routes and speed profiles: `routes`; selectors:
`selectors`; YAML/JSON edit files with sweeps: `editfile` (reading and field checks:
`editfile_parse`); what `avsim edit` writes: `output`; checks: `validate`; `diff`; bird's-eye
`preview`; the `avsim edit / validate / diff / preview` commands (option parsing only): `cli`.
See docs/editing.md.
"""
