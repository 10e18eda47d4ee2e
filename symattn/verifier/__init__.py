"""The standalone verifier of symattn's float64-path certificates: ``python -m symattn.verifier CERT``.

All a reader has to trust: the Python standard library, mpmath, and these few hundred lines, which share
no code with the engine that made the certificate and import nothing else of symattn (a test runs them
with only this folder and mpmath on the path). They read the certificate strictly (:mod:`.reading`),
find, hash and read its ``.npy`` inputs (:mod:`.npyfile`, :mod:`.binding`), and prove every value from the
inputs alone in exact integers and mpmath's outward-rounded exp and log (:mod:`.arithmetic`,
:mod:`.checking`); IEEE arithmetic is not assumed anywhere. It is slow (pure Python): the second opinion
for a skeptic, beside ``symattn verify-certificate``, which recomputes the floats with numpy.
"""
