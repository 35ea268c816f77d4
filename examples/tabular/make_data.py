"""Writes data/houses.csv: a synthetic house-price table (numbers and one category) for a regression.

    python3 make_data.py --rows 600
"""
import argparse
import csv
import os
import random

parser = argparse.ArgumentParser()
parser.add_argument("--rows", type=int, default=600)
parser.add_argument("--out", default="data/houses.csv")
args = parser.parse_args()
random.seed(7)
os.makedirs(os.path.dirname(args.out), exist_ok=True)
premium = {"north": 40.0, "south": 0.0, "east": 15.0, "west": 25.0}
with open(args.out, "w", newline="") as f:
    out = csv.writer(f)
    out.writerow(["area_m2", "rooms", "age_years", "district", "price_k"])
    for _ in range(args.rows):
        area = random.uniform(40, 200)
        rooms = random.randint(1, 6)
        age = random.uniform(0, 80)
        district = random.choice(sorted(premium))
        price = 1.8 * area + 12 * rooms - 0.9 * age + premium[district] + random.gauss(0, 8)
        out.writerow([f"{area:.1f}", rooms, f"{age:.1f}", district, f"{price:.1f}"])
print(f"wrote {args.rows} rows to {args.out}")
