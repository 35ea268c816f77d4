"""Predictions of a model trainpoint trained on a table_csv, for the rows of a CSV file with the same columns.

usage: python3 predict.py MODEL.pt ROWS.csv    (prints one prediction per row: a number, or a class name)

model.pt carries how its input was made (docs/training.md, "Using model.pt"): feature_names, the inputs in
order ("column" for a number, "column=value" for a category's value, "column=#na#" flagging a missing number),
feature_fill, the number a missing cell stands for, and feature_mean and feature_std, the training split's
statistics that standardized each input.
"""
import csv
import sys

import torch

# Cells trainpoint reads as a missing number (as pandas does).
MISSING = {"", "NA", "N/A", "NaN", "nan", "null", "NULL", "None"}


def encode(model, row):
    inputs = []
    for name, fill in zip(model.feature_names, model.feature_fill):
        column, one_hot, value = name.partition("=")
        cell = row[column]
        if one_hot and value == "#na#":
            inputs.append(float(cell.strip() in MISSING))
        elif one_hot:
            inputs.append(float(cell == value))
        else:
            inputs.append(fill if cell.strip() in MISSING else float(cell))
    return [(x - mean) / std for x, mean, std in zip(inputs, model.feature_mean, model.feature_std)]


def main():
    model = torch.jit.load(sys.argv[1]).eval()
    with open(sys.argv[2], newline="") as file:
        rows = list(csv.DictReader(file))
    with torch.no_grad():
        outputs = model(torch.tensor([encode(model, row) for row in rows]))
    if hasattr(model, "class_names"):
        for index in outputs.argmax(1).tolist():
            print(model.class_names[index])
    else:
        for value in outputs.flatten().tolist():
            print(value)


if __name__ == "__main__":
    main()
