#!/usr/bin/env bash
# What an image is made of, one path a line: its Dockerfile and the sources of its COPY and
# ADD lines (every word but the flags and the destination), relative to the build context
# (the repository root). images/build.sh hashes exactly these files into the image's tag.
#   images/inputs.sh images/train/Dockerfile
set -euo pipefail
dockerfile="${1:?usage: images/inputs.sh DOCKERFILE}"
echo "$dockerfile"
awk 'toupper($1) == "COPY" || toupper($1) == "ADD" {
       for (i = 2; i < NF; i++) if ($i !~ /^--/) print $i }' "$dockerfile"
