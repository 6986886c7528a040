# Sourced by the GPU window scripts (campaign.sh, kuramoto_authors.sh): installs the
# wheels carried in ${CAMPAIGN_WHEELS:-.whl} (make gpu-wheels) into
# ${CAMPAIGN_SITE:-/tmp/site} and puts them, then the checkout, on PYTHONPATH.
#   install_wheels PYTHON LOGFILE
# Says on stderr and in LOGFILE what it used; a wheel set that does not install falls
# back to the packages installed on the machine, said so.
install_wheels() {
  local py=$1 log=$2
  local whl=${CAMPAIGN_WHEELS:-.whl} site=${CAMPAIGN_SITE:-/tmp/site}
  if ls "$whl"/*.whl >/dev/null 2>&1; then
    if "$py" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target "$site" "$whl"/*.whl 2>>"$log"; then
      export PYTHONPATH=$site${PYTHONPATH:+:$PYTHONPATH}
      echo "installed $(ls "$whl"/*.whl | wc -l) wheels from $whl into $site" | tee -a "$log" >&2
    else
      echo "the wheels in $whl do not install here (see $(basename "$log")): using the packages installed here" | tee -a "$log" >&2
    fi
  else
    echo "no wheels in $whl: using the packages installed here" | tee -a "$log" >&2
  fi
  export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
}
