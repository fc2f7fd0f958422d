//! The tokens this process makes up: the inspector's session token, the gateway's admin
//! token.

use crate::error::RandomError;

/// `bytes` bytes from the OS CSPRNG as `2 × bytes` hex digits.
pub fn random_token(bytes: usize) -> Result<String, RandomError> {
    let mut b = vec![0u8; bytes];
    getrandom::fill(&mut b).map_err(RandomError)?;
    Ok(b.iter().map(|x| format!("{x:02x}")).collect())
}
