#!/usr/bin/env bash
# The real browser the tests of `lessrt serve` drive: Debian's chromium and its WebDriver (chromium-driver), installed
# with apt-get when missing (idempotent: nothing is done when both are there). Prints the two paths.
# The tests start chromedriver themselves on 127.0.0.1 and run chromium headless with a fresh profile; they fail,
# naming this script, when either binary is missing.
set -euo pipefail

need=()
command -v chromium >/dev/null 2>&1 || need+=(chromium)
command -v chromedriver >/dev/null 2>&1 || need+=(chromium-driver)
if [ "${#need[@]}" -gt 0 ]; then
    sudo=""
    if [ "$(id -u)" != 0 ]; then sudo="sudo"; fi
    echo "browser: installing ${need[*]} with apt-get" >&2
    $sudo apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends chromium chromium-driver >&2
fi
command -v chromium
command -v chromedriver
