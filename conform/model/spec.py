"""SPEC -> a model and its example inputs."""

# SPEC is one of
#
# * ``torchvision:NAME`` (``torchvision.models.get_model(NAME)``, random weights),
# * ``timm:NAME`` (``timm.create_model(NAME, pretrained=False)``),
# * ``hf:MODEL_TYPE`` (a Hugging Face ``transformers`` model of that type from a tiny config built
#   offline: two layers, width 32, a vocabulary of 128; never a download),
# * ``package.module:factory``, a callable returning ``(model, example_inputs)``; the inputs are a
#   tensor, a tuple of positional arguments, or a dict of keyword arguments;
# * ``backendbench:PATH``, a trace in BackendBench's text format: its calls are judged (there is no
#   model to run whole).
#
# Weights and inputs are drawn from a fixed seed: the same SPEC is the same model everywhere.

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from conform.errors import ConformError
from conform.model import libraries

KINDS = ("torchvision", "timm", "hf", "backendbench")
BATCH = 2
SEQUENCE = 16  # tokens per example of a language model
IMAGE = 64  # pixels a side, where the model takes any size (convolutional torchvision models)

# A tiny config: every size field a transformers config may have, set small. Fields a config
# does not know are kept as attributes and ignored.
TINY_CONFIG = {
    "hidden_size": 32,
    "n_embd": 32,
    "d_model": 32,
    "num_hidden_layers": 2,
    "n_layer": 2,
    "num_layers": 2,
    "num_attention_heads": 2,
    "n_head": 2,
    "num_key_value_heads": 2,
    "intermediate_size": 64,
    "n_inner": 64,
    "vocab_size": 128,
    "max_position_embeddings": 64,
    "n_positions": 64,
    "type_vocab_size": 2,
    "head_dim": 16,
    "bos_token_id": 0,
    "eos_token_id": 1,
    "pad_token_id": 2,
    "decoder_start_token_id": 0,
    # encoder-decoder models (t5, bart, whisper) size each side apart
    "encoder_layers": 2,
    "decoder_layers": 2,
    "num_decoder_layers": 2,
    "encoder_attention_heads": 2,
    "decoder_attention_heads": 2,
    "encoder_ffn_dim": 64,
    "decoder_ffn_dim": 64,
    "d_ff": 64,
    "d_kv": 16,
    # audio and vision inputs: whisper's frames, an image's side and patch
    "max_source_positions": 32,
    "max_target_positions": 64,
    "num_mel_bins": 16,
    "image_size": 32,
    "patch_size": 8,
}
AUDIO_SAMPLES = 1600  # a waveform (wav2vec2, hubert): its convolutions take 400 samples at least
VIDEO_FRAMES = 8


class SpecError(ConformError):
    pass


@dataclass
class Built:
    """A model (on the CPU, float32) and its example inputs."""

    spec: str
    model: torch.nn.Module
    args: tuple = ()
    kwargs: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ModelSpec:
    text: str
    kind: str  # "torchvision" | "timm" | "hf" | "factory"
    name: str

    def build(self, *, seed: int = 0) -> Built:
        """The model with weights and inputs drawn from `seed` (the same on every call)."""
        torch.manual_seed(seed)
        model, inputs = _BUILDERS[self.kind](self.name)
        args, kwargs = _split_inputs(inputs, self.text)
        return Built(self.text, model, args, kwargs)

    def builder(self, *, seed: int = 0) -> Callable[[], Built]:
        return lambda: self.build(seed=seed)


def parse(text: str) -> ModelSpec:
    """The ModelSpec of a SPEC string; SpecError (one line) when it is none."""
    kind, sep, name = text.partition(":")
    if not sep or not kind or not name:
        raise SpecError(f"model {text!r}: give torchvision:NAME, timm:NAME, hf:MODEL_TYPE or package.module:factory")
    if kind in KINDS:
        return ModelSpec(text, kind, name)
    return ModelSpec(text, "factory", text)


def _split_inputs(inputs, text: str) -> tuple[tuple, dict]:
    if isinstance(inputs, torch.Tensor):
        return (inputs,), {}
    if isinstance(inputs, dict):
        return (), dict(inputs)
    if isinstance(inputs, (tuple, list)):
        return tuple(inputs), {}
    raise SpecError(f"model {text!r}: example inputs must be a tensor, a tuple or a dict, not {type(inputs).__name__}")


def _torchvision(name: str):
    tv = libraries.torchvision()
    try:
        model = tv.models.get_model(name, weights=None)
    except ValueError as e:
        raise SpecError(f"torchvision has no model {name!r}: {e}") from None
    size = 224 if name.startswith(("vit_", "swin", "maxvit")) else IMAGE
    if name in tv.models.list_models(module=tv.models.video):
        # a clip: (batch, channels, frames, height, width)
        return model, torch.randn(BATCH, 3, VIDEO_FRAMES, size, size)
    return model, torch.randn(BATCH, 3, size, size)


def _timm(name: str):
    timm = libraries.require("timm")
    try:
        model = timm.create_model(name, pretrained=False)
    except RuntimeError as e:
        raise SpecError(f"timm has no model {name!r}: {str(e).splitlines()[0]}") from None
    channels, height, width = model.pretrained_cfg.get("input_size", (3, 224, 224))
    return model, torch.randn(BATCH, channels, height, width)


def _hf(model_type: str):
    transformers = libraries.require("transformers")
    try:
        config = transformers.AutoConfig.for_model(model_type, **TINY_CONFIG)
    except (ValueError, KeyError) as e:
        raise SpecError(f"transformers has no model type {model_type!r}: {str(e).splitlines()[0]}") from None
    # no dropout, nor any other random training-time change (layer drop, SpecAugment's masks):
    # the device, the CPU and float64 must compute the same function
    for key, value in list(vars(config).items()):
        random_train = "dropout" in key or "pdrop" in key or "layerdrop" in key
        if isinstance(value, float) and (random_train or key.startswith("mask_") and key.endswith("_prob")):
            setattr(config, key, 0.0)
    model, why = None, ""
    # an encoder-decoder whole (t5, bart, whisper), not its decoder alone as a causal LM
    heads = (
        ("AutoModelForSeq2SeqLM", "AutoModelForSpeechSeq2Seq") if getattr(config, "is_encoder_decoder", False) else ()
    )
    for auto in (*heads, "AutoModelForCausalLM", "AutoModelForMaskedLM", "AutoModel"):
        try:
            model = getattr(transformers, auto).from_config(config)
            break
        except ValueError as e:
            why = str(e).splitlines()[0] if str(e) else type(e).__name__
    if model is None:
        raise SpecError(f"transformers builds no model from a {model_type!r} config: {why}")
    return model, _hf_inputs(model, config)


def _hf_inputs(model, config) -> dict:
    """The model's main input (token ids, a waveform, mel frames or an image, by its
    `main_input_name`), decoder ids for an encoder-decoder, and labels where the model has a
    language-model head (its own loss then ends the step)."""
    main = getattr(model, "main_input_name", "input_ids")
    ids = torch.randint(3, config.vocab_size, (BATCH, SEQUENCE)) if getattr(config, "vocab_size", None) else None
    if main == "input_values":
        inputs = {main: torch.randn(BATCH, AUDIO_SAMPLES)}
    elif main == "input_features":
        frames = 2 * getattr(config, "max_source_positions", SEQUENCE)
        inputs = {main: torch.randn(BATCH, getattr(config, "num_mel_bins", 80), frames)}
    elif main == "pixel_values":
        side = getattr(config, "image_size", IMAGE)
        inputs = {main: torch.randn(BATCH, getattr(config, "num_channels", 3), side, side)}
    else:
        inputs = {main: ids}
    if getattr(config, "is_encoder_decoder", False) and ids is not None:
        inputs["decoder_input_ids"] = ids
    if type(model).__name__.endswith(("ForCausalLM", "ForMaskedLM", "ForConditionalGeneration")) and ids is not None:
        inputs["labels"] = ids.clone()
    return inputs


def _factory(text: str):
    module_name, _, attr = text.partition(":")
    try:
        obj = importlib.import_module(module_name)
        for part in attr.split("."):
            obj = getattr(obj, part)
    except ImportError as e:
        raise SpecError(f"model {text!r}: cannot import {module_name}: {e}") from None
    except AttributeError:
        raise SpecError(f"model {text!r}: {module_name} has no {attr}") from None
    if not callable(obj):
        raise SpecError(f"model {text!r}: {attr} is not callable")
    got = obj()
    if not (isinstance(got, tuple) and len(got) == 2 and isinstance(got[0], torch.nn.Module)):
        raise SpecError(f"model {text!r}: the factory must return (model, example_inputs)")
    return got


def _no_model(path: str):
    raise SpecError(f"backendbench:{path} is a trace, not a model")


_BUILDERS = {"torchvision": _torchvision, "timm": _timm, "hf": _hf, "factory": _factory, "backendbench": _no_model}


# -- one step of the model ------------------------------------------------------------------


def prepare(model: torch.nn.Module, *, train: bool) -> torch.nn.Module:
    """`model` in training mode (batch statistics) with dropout off, or in eval mode: the device,
    the CPU and float64 must compute one function, and dropout draws differ between them."""
    model.train(train)
    for m in model.modules():
        if isinstance(m, torch.nn.modules.dropout._DropoutNd):
            m.p = 0.0
    return model


def loss_of(output) -> torch.Tensor:
    """The scalar whose backward is the model's backward: the model's own loss where it returns
    one (a language model given labels), else the mean square of its floating outputs."""
    loss = getattr(output, "loss", None)
    if isinstance(loss, torch.Tensor) and loss.dim() == 0:
        return loss
    leaves = [t for t in floating_leaves(output) if t.requires_grad]
    if not leaves:
        raise SpecError("the model's outputs do not require grad: nothing to train (try --no-train)")
    return sum(t.square().mean() for t in leaves)


def floating_leaves(output) -> list[torch.Tensor]:
    """The floating tensors of a model's output (tensors, tuples, dicts, ModelOutput), in order."""
    found: list[torch.Tensor] = []

    def walk(v):
        if isinstance(v, torch.Tensor):
            if v.is_floating_point() or v.is_complex():
                found.append(v)
        elif isinstance(v, dict):
            for x in v.values():
                walk(x)
        elif isinstance(v, (list, tuple)):
            for x in v:
                walk(x)

    walk(output)
    return found


def step(model: torch.nn.Module, args: tuple, kwargs: dict, *, train: bool):
    """One forward (and, with `train`, the backward of `loss_of`): the model's output."""
    if not train:
        with torch.no_grad():
            return model(*args, **kwargs)
    output = model(*args, **kwargs)
    loss_of(output).backward()
    return output
