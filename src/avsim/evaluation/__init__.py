"""Video-fidelity and detection-gap metrics and reports."""
