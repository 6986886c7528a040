"""scripts/ holds only thin command lines: each file at most 100 lines, and at
module level nothing but a docstring, imports, ``main()`` (with its flag
parsing) and the ``if __name__ == "__main__":`` guard. The logic lives in the
package (``fedfrac_lab.reproduce``, ``fedfrac.sweep``, ``fedfrac_lab.bench``)."""
from __future__ import annotations

import ast
import glob
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MAX_LINES = 100


def violations(source, name):
  """Messages for every rule ``source`` (one script's text) breaks."""
  out = []
  if source.count("\n") > MAX_LINES:
    out.append(f"{name}: {source.count(chr(10))} lines > {MAX_LINES}")
  for node in ast.parse(source).body:
    if isinstance(node, (ast.Import, ast.ImportFrom)):
      continue
    if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
      continue   # docstring
    if isinstance(node, ast.FunctionDef) and node.name == "main":
      continue
    if (isinstance(node, ast.If) and isinstance(node.test, ast.Compare)
        and isinstance(node.test.left, ast.Name) and node.test.left.id == "__name__"):
      continue
    what = getattr(node, "name", type(node).__name__)
    out.append(f"{name}:{node.lineno}: defines {what!r} (only main() is allowed)")
  return out


def test_every_script_is_a_thin_command_line():
  scripts = sorted(glob.glob(os.path.join(ROOT, "scripts", "*.py")))
  problems = []
  for path in scripts:
    with open(path, encoding="utf-8") as f:
      problems += violations(f.read(), os.path.relpath(path, ROOT))
  assert not problems, "\n".join(problems)


def test_the_check_catches_logic_in_a_script():
  fat = '"""x"""\nimport os\nLIMIT = 3\ndef helper():\n  pass\ndef main():\n  pass\n'
  found = violations(fat, "fat.py")
  assert [m.split("defines ")[1] for m in found] == ["'Assign' (only main() is allowed)",
                                                     "'helper' (only main() is allowed)"]
  assert violations("def main():\n  pass\n" + "\n" * 120, "long.py")[0].startswith(
      "long.py: 122 lines")
  assert violations('"""ok"""\nfrom m import main\nif __name__ == "__main__":\n  main()\n',
                    "ok.py") == []
