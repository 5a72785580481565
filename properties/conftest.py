"""The shipped checks' conftest: deferlab's suite plugin (`deferlab.properties.suite`)."""

pytest_plugins = ("deferlab.properties.suite",)
