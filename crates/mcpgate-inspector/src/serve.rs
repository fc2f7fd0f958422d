//! The front's hook: every request the front has no route for goes to the UI protocol.

use std::sync::Arc;

use http::{Request, Response};
use mcpgate_server::body::{Body, ReqBody};
use mcpgate_server::{Conn, Fallback, Front};

use crate::inspector::Inspector;

impl Fallback for Inspector {
    fn serve<'a>(
        &'a self,
        front: &'a Arc<Front>,
        req: Request<ReqBody>,
        conn: Conn,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Response<Body>> + Send + 'a>> {
        Box::pin(async move {
            match &self.v2 {
                Some(v2) => crate::v2::handle(front, self, v2, req).await,
                None => crate::v1::handle(front, self, req, conn.peer().ip()).await,
            }
        })
    }
}
