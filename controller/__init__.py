"""The drakit companion controller: claim generation, claim lifecycle, allocation and binding."""
