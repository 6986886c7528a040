"""Data: sources, partitioners and the flat FederatedData layout."""
from fedfrac.data.federated import DataInfo, FederatedData, build, federate, index_table
from fedfrac.data.partition import (SCHEMES, class_counts, dirichlet, iid, label_skew,
                                    natural, pathological, shards, split_iid,
                                    split_test_like_train)
# ``fedfrac.data.partition`` is the module, callable as its ``partition`` function.
from fedfrac.data import partition
from fedfrac.data.sources import Dataset, sklearn_digits, synthetic, tfds_source
from fedfrac.data.files import DataFileError, load_files
from fedfrac.data.arrays import user_data
from fedfrac.data.validate import DataError
from fedfrac.data.bev import BEVData, make_windows
from fedfrac.data.synthetic_bev import simulate_fleet
from fedfrac.data.ved import load_ved_csv
