# pytest only offers a file to the collect hooks of plugins and of conftest.py
# files above it, and guide.md sits at the root: so the plugin that collects
# its console blocks is loaded here. The code lives in tests/guide_plugin.py.
pytest_plugins = ["guide_plugin"]
