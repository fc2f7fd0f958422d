//! Reading an HTTP body whole. A body that comes in one frame — a JSON answer or a POST of
//! a few hundred bytes usually does — is returned as that frame, without the queue of
//! frames `http_body_util`'s `collect` builds; only a body of several frames is copied
//! into one buffer.

use bytes::{Bytes, BytesMut};
use http_body::Body;
use http_body_util::BodyExt;

/// The whole of `body`'s data (trailers are dropped).
pub async fn whole<B>(mut body: B) -> Result<Bytes, B::Error>
where
    B: Body<Data = Bytes> + Unpin,
{
    let mut first: Option<Bytes> = None;
    let mut joined: Option<BytesMut> = None;
    while let Some(frame) = body.frame().await {
        let Ok(data) = frame?.into_data() else {
            continue;
        };
        match (&first, &mut joined) {
            (None, _) => first = Some(data),
            (Some(f), None) => {
                let mut all = BytesMut::with_capacity(f.len() + data.len());
                all.extend_from_slice(f);
                all.extend_from_slice(&data);
                joined = Some(all);
            }
            (Some(_), Some(all)) => all.extend_from_slice(&data),
        }
    }
    Ok(match joined {
        Some(all) => all.freeze(),
        None => first.unwrap_or_default(),
    })
}

#[cfg(test)]
mod tests {
    use super::whole;
    use bytes::Bytes;
    use http_body_util::{BodyExt, Full, StreamBody};

    #[tokio::test]
    async fn one_frame_is_returned_as_is_and_several_are_joined() {
        let one = Bytes::from_static(b"{\"jsonrpc\":\"2.0\"}");
        let got = whole(Full::new(one.clone())).await.unwrap();
        assert_eq!(got, one);
        assert_eq!(got.as_ptr(), one.as_ptr(), "one frame is not copied");
        let frames = ["ab", "", "cd", "e"]
            .map(|s| Ok::<_, std::convert::Infallible>(http_body::Frame::data(Bytes::from(s))));
        let body = StreamBody::new(futures::stream::iter(frames));
        assert_eq!(whole(body).await.unwrap(), "abcde");
        let empty = Full::new(Bytes::new()).boxed();
        assert_eq!(whole(empty).await.unwrap(), "");
    }
}
