"""A float kernel to measure: plain Python float64 attention on seed.toml, written as JSON results.

Run it next to seed.toml (`symattn example --lang en -o seed.toml`); it writes o64.json (the float64
output) and o32.json (the same output rounded to float32). The documentation runs it when it is built.
"""

import json
import math
import struct
import tomllib

with open("seed.toml", "rb") as fh:
    spec = tomllib.load(fh)
Q, K, V = ([[float(x) for x in row] for row in spec[m]] for m in "QKV")
scale = 1 / math.sqrt(len(Q[0]))
out = []
for q in Q:  # softmax(q·Kᵀ / √d_k) V, one query at a time
    z = [scale * sum(a * b for a, b in zip(q, k)) for k in K]
    e = [math.exp(x - max(z)) for x in z]
    w = [x / sum(e) for x in e]
    out.append([sum(wj * v[c] for wj, v in zip(w, V)) for c in range(len(V[0]))])

with open("o64.json", "w") as fh:
    json.dump(out, fh)  # each float's repr, which reads back as exactly that float
with open("o32.json", "w") as fh:
    json.dump([[struct.unpack("f", struct.pack("f", x))[0] for x in row] for row in out], fh)
