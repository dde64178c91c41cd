"""Offline checks of infra/ and of its agreement with the code (README.md here).

``python -m harness.tools.iac ROOT`` runs under ``.venv-bicep`` (pycep-parser); ``python -m
harness.tools.iac.checkov_check ROOT`` runs under ``.venv-checkov``. Nothing here imports the project.
"""
