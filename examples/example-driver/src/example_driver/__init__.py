"""dra-example-driver's kubelet plugin on drakit: see :mod:`example_driver.driver`."""
