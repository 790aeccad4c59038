"""Pure facts and arithmetic the rest of the program stands on: EC2 instance types, EKS versions
and their pinned builds, subnet planning, what a pod can have on a node.

Imports nothing from `components`; everything here takes and returns plain values.
"""
