"""Layerdeck's Qt front end. Widgets show :mod:`app` objects and turn gestures into commands."""
