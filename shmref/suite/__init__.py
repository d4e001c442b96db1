"""shmref's conformance suite: tests that judge any implementation of the
seed's API (`--shmref-impl MODULE`) by the contract in shmref.contract.

    pytest --shmref-impl their.module --pyargs shmref.suite
"""
