"""Test-wide setup: offscreen Qt, settings in a temporary folder, llama.cpp fixtures."""

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

pytest_plugins = ["tests.llama_fixtures"]
