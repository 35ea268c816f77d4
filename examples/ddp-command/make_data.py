"""Writes data/points.csv: two interleaved half-moons, a small classification problem."""
import csv
import math
import os
import random

random.seed(3)
os.makedirs("data", exist_ok=True)
with open("data/points.csv", "w", newline="") as f:
    out = csv.writer(f)
    out.writerow(["x1", "x2", "label"])
    for i in range(800):
        label = i % 2
        angle = random.uniform(0, math.pi)
        x1 = math.cos(angle) + (1.0 if label else 0.0) + random.gauss(0, 0.1)
        x2 = math.sin(angle) * (-1 if label else 1) + (0.5 if label else 0.0) + random.gauss(0, 0.1)
        out.writerow([f"{x1:.4f}", f"{x2:.4f}", label])
