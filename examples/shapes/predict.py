"""Predictions of an image model trainpoint trained, for image files.

usage: python3 predict.py MODEL.pt IMAGE...    (prints one line per image: the file, then its class and that
                                               class's probability, its labels, or its number)

model.pt carries how its input was made (docs/training.md, "Using model.pt"): image_size and channels (1: gray,
3: RGB); resize, "stretch" (the whole image) or "crop" (its centre square), to image_size x image_size with a
bilinear filter as PIL's; pixel_mean and pixel_std (the input is (pixel / 255 - mean) / std per channel,
channels first); and task and class_names, what the outputs mean.
"""
import sys

import torch
from PIL import Image


def load(model, path):
    image = Image.open(path).convert("L" if model.channels == 1 else "RGB")
    width, height = image.size
    box = (0, 0, width, height)
    if model.resize == "crop":
        side = min(width, height)
        box = ((width - side) / 2, (height - side) / 2, (width + side) / 2, (height + side) / 2)
    size = model.image_size
    image = image.resize((size, size), Image.BILINEAR, box=box)
    pixels = torch.frombuffer(bytearray(image.tobytes()), dtype=torch.uint8)
    x = pixels.reshape(size, size, model.channels).permute(2, 0, 1).float() / 255
    return (x - torch.tensor(model.pixel_mean).reshape(-1, 1, 1)) / torch.tensor(model.pixel_std).reshape(-1, 1, 1)


def main():
    model = torch.jit.load(sys.argv[1]).eval()
    files = sys.argv[2:]
    with torch.no_grad():
        outputs = model(torch.stack([load(model, path) for path in files]))
    for path, output in zip(files, outputs):
        if model.task == "classification":
            probabilities = output.softmax(0)
            index = int(probabilities.argmax())
            print(path, model.class_names[index], f"{probabilities[index].item():.4f}")
        elif model.task == "multi_label":
            print(path, *[name for name, score in zip(model.class_names, output.tolist()) if score > 0])
        else:
            print(path, output.item())


if __name__ == "__main__":
    main()
