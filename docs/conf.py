"""Sphinx configuration: Markdown pages (MyST) and a command reference generated from the commands'
argparse parsers (sphinx-argparse), so it cannot drift from --help. CI builds it with warnings as errors:
python -m sphinx -W --keep-going -b html docs docs/_build/html"""

import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
sys.path.insert(0, str(DOCS.parent))  # a checkout documents its own othello_learn, not an older install

project = "othello-learn"
extensions = ["myst_parser", "sphinxarg.ext"]
source_suffix = {".md": "markdown"}
exclude_patterns = ["_build"]
myst_heading_anchors = 3  # [text](page.md#a-heading) links resolve, and are checked
html_theme = "furo"
html_title = "othello-learn"
smartquotes = False  # --flag stays two hyphens, not a dash


def _plain_text_help():
    """The parsers' texts are plain text, as --help prints them, not reStructuredText: their help strings
    and descriptions are escaped (``best-*.ckpt`` is no emphasis) and each epilog is shown verbatim.
    A default path inside the checkout is shown relative to it, as on any machine."""
    import re
    import textwrap

    import sphinxarg.ext

    def escape(text):
        return re.sub(r"([\\`*_|])", r"\\\1", text)

    def escaped(node):
        if isinstance(node, dict):
            return {k: (escape(v) if k in ("help", "description") and isinstance(v, str)
                        else str(v).replace(f"{DOCS.parent}/", "") if k == "default" and isinstance(v, (str, Path))
                        else "::\n\n" + textwrap.indent(v, "   ") if k == "epilog" and isinstance(v, str)
                        else escaped(v)) for k, v in node.items()}
        if isinstance(node, list):
            return [escaped(v) for v in node]
        return node

    parse = sphinxarg.ext.parse_parser
    sphinxarg.ext.parse_parser = lambda *args, **kwargs: escaped(parse(*args, **kwargs))


_plain_text_help()
