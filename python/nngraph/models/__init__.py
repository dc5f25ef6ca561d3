"""Ready-made networks: those of the WWDC 2018 session, a residual network with batch
normalization for 28×28 images and a denoising autoencoder (`small`); ResNet-18 and -50,
Inception-v3 and the airbench94 speed-run network, with torchvision's (airbench's) layer
names."""

from nngraph.models._build import Classifier
from nngraph.models.inception import inception_v3
from nngraph.models.resnet import resnet18, resnet50
from nngraph.models.small import (
    DIGIT_LAYERS,
    ActivityNetwork,
    DenoisingAutoencoder,
    DigitNetwork,
    ResidualNetwork,
    activity_network,
    autoencoder_layers,
    denoising_autoencoder,
    digit_network,
    digit_weights,
    residual_layers,
    residual_network,
)
from nngraph.models.speedrun import speedrun_net, whitening_weights

__all__ = ["DIGIT_LAYERS", "ActivityNetwork", "Classifier", "DenoisingAutoencoder", "DigitNetwork", "ResidualNetwork",
           "activity_network", "autoencoder_layers", "denoising_autoencoder", "digit_network", "digit_weights",
           "inception_v3", "resnet18", "resnet50", "residual_layers", "residual_network", "speedrun_net",
           "whitening_weights"]
