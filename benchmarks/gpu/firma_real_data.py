"""FIRMA Tables 7–8 (Fashion-MNIST) and 9–10 (MNIST-60k) on local files; the same
command as ``fedfrac-reproduce firma_files`` (:mod:`fedfrac_lab.reproduce.firma_files`).

  python benchmarks/gpu/firma_real_data.py --dir=/usr/share/datasets/fashion-mnist \
      --modes=paper,reference_code --seeds=2 --json=F.json
  python benchmarks/gpu/firma_real_data.py --table=F.json --out=results/firma_fashion_mnist.md
"""
from fedfrac_lab.reproduce import firma_files


def main():
  firma_files.main()


if __name__ == "__main__":
  main()
