// Probe: hole 4: a transport's RequestState hands the core another request than the one it maps back
// expect: E0200

struct TwoRequests {
    mapped_back: crate::nvmet::request::Request,
    other: crate::nvmet::request::Request,
}

impl crate::nvmet::request::RequestState for TwoRequests {
    const REQUEST_OFFSET: usize = 0;

    fn request(&mut self) -> &mut crate::nvmet::request::Request {
        &mut self.other
    }
}
