//! Linear, homogeneous, isotropic material (dissertation §4.4.4, Eq. 4.7):
//! `σ = 2 μ ε + λ tr(ε) I`, with Lamé's parameters derived from Young's modulus `E` and
//! Poisson's ratio `ν`:
//!
//! ```text
//! λ = E ν / ((1 + ν)(1 - 2ν)),   μ = E / (2 (1 + ν))
//! ```
//!
//! For triangles (d = 2) the same `λ, μ` give **plane strain**: Eq. 4.7 restricted to in-plane
//! strains with `ε_zz = ε_xz = ε_yz = 0` (energy per unit thickness).

use crate::error::FemError;

/// Material parameters: Young's modulus, Poisson's ratio and mass density.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Material {
    /// Young's modulus `E > 0`.
    pub youngs: f64,
    /// Poisson's ratio `-1 < ν < 1/2`.
    pub poisson: f64,
    /// Mass density `ρ >= 0` (used by the consistent mass matrix).
    pub density: f64,
}

/// Lamé's first and second parameters `(λ, μ)`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Lame {
    /// First Lamé parameter `λ`.
    pub lambda: f64,
    /// Shear modulus `μ`.
    pub mu: f64,
}

impl Material {
    /// A material; checked by [`Material::validate`] when used.
    pub fn new(youngs: f64, poisson: f64, density: f64) -> Self {
        Self {
            youngs,
            poisson,
            density,
        }
    }

    /// Check `E > 0`, `-1 < ν < 1/2`, `ρ >= 0`, all finite.
    pub fn validate(&self) -> Result<(), FemError> {
        if !(self.youngs.is_finite() && self.youngs > 0.0) {
            return Err(FemError::InvalidMaterial(format!(
                "Young's modulus must be positive and finite, got {}",
                self.youngs
            )));
        }
        if !(self.poisson.is_finite() && self.poisson > -1.0 && self.poisson < 0.5) {
            return Err(FemError::InvalidMaterial(format!(
                "Poisson's ratio must be in (-1, 0.5), got {}",
                self.poisson
            )));
        }
        if !(self.density.is_finite() && self.density >= 0.0) {
            return Err(FemError::InvalidMaterial(format!(
                "density must be non-negative and finite, got {}",
                self.density
            )));
        }
        Ok(())
    }

    /// Lamé parameters (Eq. 4.7) after validation.
    pub fn lame(&self) -> Result<Lame, FemError> {
        self.validate()?;
        let (e, nu) = (self.youngs, self.poisson);
        Ok(Lame {
            lambda: e * nu / ((1.0 + nu) * (1.0 - 2.0 * nu)),
            mu: e / (2.0 * (1.0 + nu)),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn lame_conversion_hand_checked() {
        // E = 2.6, ν = 0.3: μ = 1, λ = 2.6 * 0.3 / (1.3 * 0.4) = 1.5
        let l = Material::new(2.6, 0.3, 1.0).lame().unwrap();
        assert!((l.mu - 1.0).abs() < 1e-15);
        assert!((l.lambda - 1.5).abs() < 1e-15);
        assert!(Material::new(1.0, 0.5, 1.0).lame().is_err());
        assert!(Material::new(-1.0, 0.3, 1.0).lame().is_err());
        assert!(Material::new(1.0, 0.3, -1.0).lame().is_err());
        assert!(Material::new(f64::NAN, 0.3, 1.0).lame().is_err());
    }
}
