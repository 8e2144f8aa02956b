// Probe: hole 4: a transport's RequestState hands the core another request than the one it maps back
// expect: ok
//
// `RequestState` and `HasRequest` are safe traits since the layers' macros expand no
// `unsafe` (so that every transport file forbids it): this misuse compiles, and
// `Request::init` refuses it at run time, starting only the request at
// `HasRequest::OFFSET` from its object, inside its slot's state (`Request::placed`;
// KUnit `nvmet_rs_binding.request_started_only_where_declared`).

struct TwoRequests {
    mapped_back: crate::nvmet::request::Request,
    other: crate::nvmet::request::Request,
}

impl crate::nvmet::request::RequestState for TwoRequests {
    fn request(&mut self) -> &mut crate::nvmet::request::Request {
        &mut self.other
    }
}
