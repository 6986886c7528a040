"""Data: sources, partitioners and the flat FederatedData layout."""
from fedfrac.data.federated import build, federate
from fedfrac.data.federated_data import DataInfo, FederatedData, index_table
from fedfrac.data.partition import class_counts, split_iid, split_test_like_train
from fedfrac.data.partition_schemes import SCHEMES, dirichlet, iid, natural, shards
from fedfrac.data.label_skew import label_skew, pathological
# ``fedfrac.data.partition`` is the function; its module (the schemes and the
# dispatch) is imported by name: ``from fedfrac.data.partition import dirichlet``.
from fedfrac.data.partition import partition
from fedfrac.data.sources import sklearn_digits, synthetic, tfds_source
from fedfrac.data.dataset import Dataset
from fedfrac.data.files import DataFileError, load_files
from fedfrac.data.arrays import user_data
from fedfrac.data.array_checks import DataError
from fedfrac.data.bev import BEVData, make_windows
from fedfrac.data.synthetic_bev import simulate_fleet
from fedfrac.data.ved import load_ved_csv
