"""Pictures of traces: one trace format (traceformat.py), one SVG renderer (svg.py)
and the conformance report's HTML page (html.py)."""
