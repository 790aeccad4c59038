"""Pure facts and arithmetic the rest of the program stands on: EC2 instance types, EKS versions
and their pinned builds, subnet planning, what a pod can have on a node and the IPs a node takes,
Regions and AZ IDs, file-system limits and flush times, the price table and the cost model.
The full list, module by module: docs/architecture.md, "Where things are made".

Imports nothing from `components`; everything here takes and returns plain values.
"""
