"""World-scenario control-video renderer."""
