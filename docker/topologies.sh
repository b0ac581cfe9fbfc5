#!/bin/sh
# Writes each test node's topology, /etc/slurm/topology/NODE.xml, from the synthetic
# descriptions in /etc/slurm/topologies.txt (NODE DESCRIPTION per line). Run by both node
# images' Dockerfiles.
set -e
mkdir -p /etc/slurm/topology
grep -v '^#' /etc/slurm/topologies.txt | while read -r node desc; do
    lstopo-no-graphics -i "$desc" --of xml "/etc/slurm/topology/$node.xml"
done
