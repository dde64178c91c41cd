#!/bin/sh
# Retake docs/images/dashboard*.png: the browser test (tests/app/test_dashboard.py) saves the pages
# it checks, at 1366x768, when SAS_SCREENSHOTS names a folder. So each picture shows a state the
# test asserted, never a hand-staged one.
set -eu
cd "$(dirname "$0")/../.."
SAS_SCREENSHOTS=docs/images exec .venv/bin/python -m pytest -p no:cacheprovider -n 0 -q tests/app/test_dashboard.py
